"""What `import sys` and `import types` give a submission in a sandbox child: the everyday names, nothing else.

Students print to `sys.stderr`, flush `sys.stdout`, add a folder to `sys.path` and build a `types.SimpleNamespace`;
none of that reaches the interpreter's state. `sys.modules`, frames, tracing hooks and the import machinery are
not here: reading one is an AttributeError that says what there is. (The walls do not rest on this: a child holds
no answer to read, whatever it reaches.) Torch-free, so the parent's source scan reads the same table.
"""

from __future__ import annotations

import sys
import types

# module -> the names its stand-in offers (sys.stdout and sys.stderr read live: whatever the child prints to now)
STAND_INS = {
    "sys": frozenset(
        "argv byteorder exit float_info getrecursionlimit getsizeof hexversion int_info maxsize path platform "
        "setrecursionlimit stderr stdout version version_info".split()
    ),
    "types": frozenset({"SimpleNamespace"}),
}
_LIVE = frozenset({"stdout", "stderr"})
MISSING = (
    "module '{module}' has no attribute '{attr}' in the grader's sandbox; it offers: {offered}. Use one of those, or "
    "take that line out of the graded file (it belongs in the notebook)"
)


def missing(name: str, attr: str) -> str:
    """Return what to tell a file that reads a name the stand-in for module `name` does not offer."""
    return MISSING.format(module=name, attr=attr, offered=", ".join(sorted(STAND_INS[name])))


def stand_in(name: str) -> types.ModuleType:
    """Return a fresh stand-in for module `name` (one of STAND_INS), holding only the names it offers."""
    real, offered = sys.modules[name], STAND_INS[name]
    module = types.ModuleType(name)
    for attr in offered - _LIVE:
        setattr(module, attr, getattr(real, attr))
    if name == "sys":  # copies: the child's own stay as they are, and its command line (the grader's) is not shown
        module.path, module.argv = list(real.path), [""]

    def __getattr__(attr: str):
        if attr in _LIVE and attr in offered:
            return getattr(sys, attr)
        raise AttributeError(missing(name, attr))

    module.__getattr__ = __getattr__
    return module
