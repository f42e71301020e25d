"""What `grade batch` starts before torch is imported: the class found on disk, and its similarity check beside.

Importing torch takes one core for over a second. Finding the class and comparing its files need no torch, so
the comparison runs in a child on the other core meanwhile, instead of beside the grading later.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.classroom import pool
from grader.classroom.reports import EmptyClassError, class_similarity
from grader.submissions.intake import discover


class BatchNeedsLinux(RuntimeError):
    """`grade batch` was run on a platform without fork and namespaces."""


@dataclass
class Early:
    """The class's entries and skipped files, and the similarity check running on them (None: not asked for)."""

    entries: list
    skipped: list
    compared: pool.Background | None


def start(submissions: Path, similarity_base=(), similarity: bool = True) -> Early:
    """Find the class in SUBMISSIONS and start comparing it in a child; raise if there is nobody to grade."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        raise BatchNeedsLinux(
            "grade batch needs Linux: it forks grading processes and sandboxes each student in "
            "its own namespaces. Grade single submissions here with `grade all --submission DIR`."
        )
    entries, skipped = discover(submissions)
    if not entries:
        raise EmptyClassError(submissions, skipped)
    # it reads every file but runs no student code: a child of this process, which holds no student's data
    compared = pool.Background(lambda: class_similarity(entries, similarity_base)) if similarity else None
    return Early(entries, skipped, compared)
