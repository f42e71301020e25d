"""Time check("ex1") in a warm IPython kernel, as a student runs it under their Ex1 cell (issue #22: at most 0.2 s).

An in-process IPython shell runs the reference Ex1 as a cell (stored in its history, which check() reads), then
check("ex1") is timed once cold and five times warm; every run must print "score 26/26".

    python bench/bench_check.py
"""

from __future__ import annotations

import contextlib
import io
import statistics
import time
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[1] / "reference"


def main() -> None:
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell((REFERENCE / "ex1.py").read_text(), store_history=True)
    from grader import check

    times = []
    for _ in range(6):
        shown = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(shown):
            check("ex1")
        times.append(time.perf_counter() - start)
        if "score 26/26" not in shown.getvalue():
            raise SystemExit(f"check('ex1') did not give 26/26:\n{shown.getvalue()[-1500:]}")
    warm = statistics.median(times[1:])
    print(
        f"check('ex1'): first {times[0]:.3f} s, then median {warm:.3f} s of 5 (range {min(times[1:]):.3f}-"
        f"{max(times[1:]):.3f}); warm / 0.2 s target: {warm / 0.2:.2f}"
    )


if __name__ == "__main__":
    main()
