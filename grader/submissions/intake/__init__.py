"""Intake: turn a submissions folder into students to grade and a list of what was skipped, and why."""

from grader.submissions.intake.discover import Entry, Skipped, discover, read_entry, read_submission
from grader.submissions.intake.files import decode_source
from grader.submissions.intake.read import IntakeSubmission, with_intake

__all__ = [
    "Entry",
    "IntakeSubmission",
    "Skipped",
    "decode_source",
    "discover",
    "read_entry",
    "read_submission",
    "with_intake",
]
