"""An overall time limit for grading one submission, for the paths that must always answer (Gradescope).

Each call of student code has its own deadline in the sandbox; this one bounds the rest too: the grader's own
reading of the student's files, archives and notebooks, and the judging of what came back. `grade batch`
enforces the same bound by killing a student's grading process.
"""

from __future__ import annotations

import contextlib
import signal
import threading

PER_STUDENT_TIMEOUTS = 40  # a submission's grading may take this many per-call timeouts in all, plus a margin
MARGIN = 120.0
SIMILARITY_READ = 30.0  # seconds the similarity check spends reading one student's files before leaving them out


def per_submission(call_timeout: float) -> float:
    """Return the seconds one submission's whole grading may take, given the per-call timeout."""
    return call_timeout * PER_STUDENT_TIMEOUTS + MARGIN


class GradingTooLong(BaseException):  # noqa: N818 - like KeyboardInterrupt: no `except Exception` swallows it
    """Raised in the grading process when a submission's grading overruns its overall limit."""


@contextlib.contextmanager
def overall(seconds: float):
    """Raise GradingTooLong in this (main) thread if the block runs longer than seconds; a no-op elsewhere."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def overran(signum, frame):
        raise GradingTooLong(f"grading this submission took longer than {seconds:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
