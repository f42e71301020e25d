"""Intake: turn a submissions folder into students to grade and a list of what was skipped, and why."""

from grader.sandbox.lazy import exports

# Each public name and the module that holds it, imported on first use: `grade exN` reads one folder through
# intake.files and should not load every archive format finding.py knows (zip, tar, lzma, bz2) to do it.
_WHERE = {
    "Entry": "finding",
    "Skipped": "finding",
    "discover": "finding",
    "read_entry": "finding",
    "read_submission": "finding",
    "decode_source": "files",
    "IntakeSubmission": "read",
    "with_intake": "read",
}
__all__ = sorted(_WHERE)


__getattr__ = exports(__name__, _WHERE)
