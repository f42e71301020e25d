"""Packages whose public names are imported on first use: importing the package itself stays cheap."""

import importlib
import sys


def exports(package: str, where: dict[str, str]):
    """Return a module __getattr__ for `package` that imports each name's module (where[name]) when first asked."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups find it directly
        return value

    return __getattr__
