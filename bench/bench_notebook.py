"""What does a notebook cost on top of the same code as .py files? Target: under 5% of `grade all`.

Writes the lecture-layout test notebook, converts it (nbformat read + parse + classify + generate), writes the
generated sources as ex1.py .. ex4.py, then times, interleaved: converting the notebook, and `runner.grade` of
that .py folder over all four exercises (warm: fixtures built once beforehand). The notebook's extra cost is the
conversion, since the graded code is the same. Prints the medians and their ratio; nothing is asserted.

    python bench/bench_notebook.py [--runs 5] [--converts 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed `grade all` runs of the .py folder")
    parser.add_argument("--converts", type=int, default=50, help="timed conversions of the notebook")
    args = parser.parse_args()

    from grader.grading.runner import grade
    from grader.submissions.notebook import notebook_sources
    from grader.submissions.sources import Submission
    from tests.notebooks import lecture

    with tempfile.TemporaryDirectory() as tmp:
        nb = lecture.write(Path(tmp) / "lecture.ipynb", lecture.lecture_cells())
        sources, _ = notebook_sources(nb)
        folder = Path(tmp) / "as_py"
        folder.mkdir()
        for ex, src in sources.items():
            (folder / f"{ex}.py").write_text(src.text)
        first = grade(folder)  # builds every fixture once, like a warm grader
        same = grade(Submission("nb", *notebook_sources(nb)))
        assert [(i.id, i.status) for i in first.items] == [(i.id, i.status) for i in same.items]
        convert, grade_py = [], []
        per_run = max(1, args.converts // args.runs)
        for _ in range(args.runs):
            for _ in range(per_run):
                t = time.perf_counter()
                notebook_sources(nb)
                convert.append(time.perf_counter() - t)
            t = time.perf_counter()
            grade(folder)
            grade_py.append(time.perf_counter() - t)
    c, g = statistics.median(convert), statistics.median(grade_py)
    print(f"convert the notebook: median {c * 1000:.1f} ms, min {min(convert) * 1000:.1f} ms (n={len(convert)})")
    print(f"grade all, .py files: median {g:.3f} s, min {min(grade_py):.3f} s (n={len(grade_py)})")
    by_min = 100 * min(convert) / min(grade_py)
    print(f"a notebook's extra cost: {100 * c / g:.2f}% of grade all (medians), {by_min:.2f}% (minimums); target < 5%")


if __name__ == "__main__":
    main()
