"""Similarity: a student's files built to exhaust the comparison leave that student out, never the class's report."""

from __future__ import annotations

import json
import random
import subprocess
import sys

from grader.classroom.reports import similarity
from tests.conftest import ROOT
from tests.independent import student_files, write_class

# Runs class_similarity as grade batch does, in a pool.Background child, under an address-space limit of 1.5 GB
# above what the imports take; prints what it found, how long it took and the child's peak resident memory.
CHILD = """
import json, resource, sys, time
from pathlib import Path
from grader.classroom import pool
from grader.classroom.reports import class_similarity
from grader.submissions.intake import discover

status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
limit = int(status["VmSize"].split()[0]) * 1024 + (1536 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
entries, _ = discover(Path(sys.argv[1]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = time.monotonic()
found = pool.Background(lambda: class_similarity(entries)).result(timeout=600)
seconds = time.monotonic() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"found": found, "seconds": seconds, "peak": peak, "inherited": before}))
"""


def _hostile_class(root):
    """Write the 20 independent students, the copier, and three students whose files are built to exhaust."""
    ids = write_class(root, copy_of=3)
    rng = random.Random(7)
    numbers = ", ".join(str(rng.randrange(10**6)) for _ in range(68_000))  # a 540 KB line of distinct numbers
    wide = numbers[:150_000].rsplit(",", 1)[0]
    hostile = {
        # one dead list literal: 540 KB on one line, inside a graded function
        "hostile_list": f"def dC(C, Xb, demb):\n    [{numbers}]\n    return torch.zeros_like(C)\n",
        # one expression nested 100,000 deep: the parser itself gives up
        "hostile_nest": "def dh(W2, dlogits):\n    return " + "-" * 100_000 + "dlogits @ W2.T\n",
        # under the file cap, but one function of 150 KB of distinct k-grams (~3 GB of masks before the caps)
        "hostile_wide": f"def dC(C, Xb, demb):\n    table = [{wide}]\n    return table\n",
    }
    for k, (sid, code) in enumerate(sorted(hostile.items())):
        (root / sid).mkdir()
        files = student_files(30 + k)
        files["ex1.py"] += "\n\n" + code
        for name, text in files.items():
            (root / sid / name).write_text(text)
    return ids, sorted(hostile)


def test_hostile_files_leave_only_their_students_out_in_bounded_time_and_memory(tmp_path):
    ids, hostile = _hostile_class(tmp_path / "class")
    assert (tmp_path / "class" / "hostile_list" / "ex1.py").stat().st_size > 540_000
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "class")], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    run = json.loads(out.stdout)
    found = run["found"]
    assert "error" not in found, found
    assert found["not_compared"] == hostile
    reasons = found["not_compared_reasons"]
    assert reasons["hostile_list"].startswith("its exercise files hold 54")
    assert "nested too deeply" in reasons["hostile_nest"]
    assert "ex1.dC has" in reasons["hostile_wide"] and "compared" in reasons["hostile_wide"]
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [("copier", "indep03")]
    assert found["compared_pairs"] == len(ids) * (len(ids) - 1) // 2
    # bounded: the whole class in well under a minute, and the child's peak a few hundred MB above what it inherited
    assert run["seconds"] < 60, run
    assert run["peak"] - run["inherited"] < 400 << 20, run


def test_each_bound_names_what_passed_it(monkeypatch):
    normal = {ex.removesuffix(".py"): text for ex, text in student_files(0).items()}
    cases = {
        "MAX_CHARS": ({**normal, "ex2": "x = 1\n" * 40_000}, "characters, more than the 200,000 the check reads"),
        "MAX_FUNCTION_TOKENS": (
            {**normal, "ex2": "def dlogits(logits, Yb, n):\n    return [" + "1, " * 9_000 + "]\n"},
            "ex2.dlogits has 18,012 tokens",
        ),
        "MAX_FUNCTIONS": (
            {**normal, "ex2": "".join(f"def f{i}():\n    return {i}\n" for i in range(300))},
            "functions",
        ),
        "MAX_DEPTH": ({**normal, "ex2": "def dlogits(logits):\n    return " + "-" * 300 + "logits\n"}, "levels deep"),
    }
    sources = {"plain": normal, "other": {ex.removesuffix(".py"): t for ex, t in student_files(1).items()}}
    sources.update({name: files for name, (files, _) in cases.items()})
    result = similarity.compare_class(sources)
    assert sorted(result.not_compared) == sorted(cases)
    for name, (_, says) in cases.items():
        assert says in result.not_compared[name], (name, result.not_compared[name])
    assert result.compared == 1 and result.to_dict()["not_compared"] == sorted(cases)


def test_a_student_slow_to_fingerprint_is_left_out_alone(monkeypatch):
    import time

    real = similarity.student_chunks

    def slow(files, memo=None):
        if "slow" in files.get("ex2", ""):
            time.sleep(5)
        return real(files, memo)

    monkeypatch.setattr(similarity, "student_chunks", slow)
    monkeypatch.setattr(similarity, "STUDENT_SECONDS", 0.5)
    sources = {f"s{k}": {ex.removesuffix(".py"): t for ex, t in student_files(k).items()} for k in range(3)}
    sources["s1"]["ex2"] += "\n# slow\n"
    result = similarity.compare_class(sources)
    assert result.not_compared == {"s1": "reading its code took longer than 0.5 s"} and result.compared == 1
