"""Intake: turn a submissions folder into students to grade and a list of what was skipped, and why."""

import importlib

# Each public name and the module that holds it, imported on first use: `grade exN` reads one folder through
# intake.files and should not load every archive format discover knows (zip, tar, lzma, bz2) to do it.
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
    """Import a public name's module when the name is first asked for."""
    if name not in _WHERE:
        raise AttributeError(f"module 'grader.submissions.intake' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grader.submissions.intake.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
