"""The grader's own reading of a student's source is bounded: no file or notebook cell costs it gigabytes or minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import nbformat
import pytest

from grader.spec import parse as bounded
from tests.conftest import REFERENCE, make_submission

HUGE_LINE = "junk = [" + "1, " * 1_200_000 + "]\n"  # 3.6 MB on one line: ~2.6 GiB and 20 s for ast.parse


def _run(args: list[str]) -> tuple[dict, float, int]:
    """Run `python -m grader ARGS --json`; return its JSON, wall seconds and peak RSS in MiB (the whole tree)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "grader", *args, "--json"], stdout=subprocess.PIPE)
    out = proc.stdout.read()
    proc.stdout.close()
    _, _, usage = os.wait4(proc.pid, 0)
    return json.loads(out), time.monotonic() - start, usage.ru_maxrss // 1024


def test_the_bound_counts_tokens_only_past_small_source():
    assert bounded.tokens_over("x = 1\n" * 1000) is None
    assert bounded.tokens_over(HUGE_LINE) is not None
    with pytest.raises(bounded.TooLarge, match="more than 100,000 tokens"):
        bounded.parse(HUGE_LINE, "ex2.py")


def test_a_huge_exercise_file_is_refused_before_any_parse(tmp_path):
    text = (REFERENCE / "ex2.py").read_text() + "\n" + "junk = [" + "1, " * 330_000 + "]\n"  # under intake's 1 MiB
    make_submission(tmp_path / "s", {"ex2.py": text})
    result, seconds, peak = _run(["ex2", "--submission", str(tmp_path / "s")])
    (item,) = result["items"]
    assert item["status"] == "error" and "more than 100,000 tokens" in item["message"], item["message"]
    assert seconds < 30 and peak < 1024, (seconds, peak)


def test_a_huge_notebook_cell_costs_seconds_and_megabytes_not_gigabytes(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch.nn.functional as F\n"),
        nbformat.v4.new_code_cell(HUGE_LINE),
        nbformat.v4.new_code_cell(
            "# Exercise 2\n" + "dlogits = F.softmax(logits, 1)\ndlogits[range(n), Yb] -= 1\ndlogits /= n\n"
        ),
    ]
    path = tmp_path / "hw.ipynb"
    nbformat.write(nb, path)
    result, seconds, peak = _run(["ex2", "--submission", str(path)])
    assert seconds < 30 and peak < 1024, (seconds, peak)
    assert result["items"][0]["status"] == "passed", result["items"][0]["message"]
