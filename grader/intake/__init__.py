"""Intake: turn a submissions folder into students to grade and a list of what was skipped, and why.

Names are loaded on first use, so that reading one folder (`grade ex1`) does not import the whole package.
"""

import importlib

_WHERE = {
    "Entry": "discover",
    "Skipped": "discover",
    "discover": "discover",
    "read_entry": "discover",
    "read_submission": "discover",
    "decode_source": "files",
    "IntakeSubmission": "read",
    "with_intake": "read",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'grader.intake' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grader.intake.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
