"""Similarity: a copied-then-renamed submission is flagged; twenty independent correct solutions are not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader.classroom.batch import grade_batch
from grader.classroom.reports import similarity
from grader.sandbox import Limits
from grader.submissions.intake import read_submission
from tests.conftest import EXERCISES, ROOT
from tests.independent import copied_and_renamed, student_files, write_class


def _sources(root, ids):
    return {s: {ex: src.text for ex, src in read_submission(root / s).sources.items()} for s in ids}


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """Write the 20 independent students and the copier, compare them, and grade them all with grade batch."""
    root = tmp_path_factory.mktemp("similarity")
    ids = write_class(root, copy_of=3)
    out = tmp_path_factory.mktemp("out")
    summary = grade_batch(root, out, jobs=2, limits=Limits(timeout=2.0, memory_mb=1024), progress=False)
    return root, ids, similarity.compare_class(_sources(root, ids)), out, summary


def test_the_independent_solutions_are_correct_and_different(klass):
    _, ids, _, out, _ = klass
    for s in ids:
        result = json.loads((out / "students" / f"{s}.json").read_text())
        assert result["score"] == result["max_score"] == 42, s
    texts = [json.dumps(student_files(k), sort_keys=True) for k in range(20)]
    assert len(set(texts)) == 20
    copy, original = copied_and_renamed(student_files(3)), student_files(3)
    assert all(copy[f] != original[f] for f in original), "the copy is renamed, not byte-identical"


def test_the_copier_is_flagged_and_no_independent_pair_is(klass):
    _, ids, result, *_ = klass
    pairs = [(p.a, p.b) for p in result.pairs]
    assert pairs == [("copier", "indep03")]
    copier = result.pairs[0]
    assert copier.score >= similarity.THRESHOLD
    assert {f.function for f in copier.functions} >= {"ex1.dC", "ex4.backward", "ex3.dhprebn"}
    assert result.compared == len(ids) * (len(ids) - 1) // 2


def test_independent_scores_stay_well_below_the_threshold(klass):
    root, ids, *_ = klass
    independent = [s for s in ids if s != "copier"]
    saved = similarity.THRESHOLD, similarity.MIN_OVERLAP
    similarity.THRESHOLD, similarity.MIN_OVERLAP = 0.0, 0
    try:
        every = similarity.compare_class(_sources(root, independent))
    finally:
        similarity.THRESHOLD, similarity.MIN_OVERLAP = saved
    assert len(every.pairs) == 190
    assert every.max_score <= similarity.THRESHOLD - 0.15, every.max_score


def test_pairs_are_grouped():
    pairs = [similarity.Pair(a, b, 1.0, 500) for a, b in (("b", "c"), ("x", "y"), ("a", "b"))]
    assert similarity.groups(pairs) == [["a", "b", "c"], ["x", "y"]]


def test_the_stub_every_student_shares_is_ignored(tmp_path):
    for s in ("s1", "s2"):
        (tmp_path / s).mkdir()
        for f in EXERCISES.glob("ex*.py"):
            (tmp_path / s / f.name).write_text(f.read_text())
    result = similarity.compare_class(_sources(tmp_path, ["s1", "s2"]))
    assert result.pairs == [] and result.max_score == 0.0


def test_scores_do_not_depend_on_python_hash_seed(klass):
    root, ids, result, *_ = klass
    code = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]);"
        "from tests.test_similarity import _sources; from grader.classroom.reports.similarity import compare_class;"
        "ids = sys.argv[3:]; print(json.dumps(compare_class(_sources(Path(sys.argv[1]), ids)).to_dict()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(root), str(ROOT), *ids], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == json.loads(json.dumps(result.to_dict()))


def test_batch_lists_the_pair_with_its_functions_side_by_side(klass):
    *_, out, summary = klass
    sim = summary["similarity"]
    assert [(p["a"], p["b"]) for p in sim["pairs"]] == [("copier", "indep03")]
    assert sim["library"] == "copydetect" and sim["groups"] == [["copier", "indep03"]]
    dc = next(f for f in sim["pairs"][0]["functions"] if f["function"] == "ex1.dC")
    assert "def dC" in dc["code_a"] and "def dC" in dc["code_b"] and dc["code_a"] != dc["code_b"]
    assert json.loads((out / "summary.json").read_text())["similarity"] == sim
    page = (out / "report.html").read_text()
    assert 'class="pair"' in page and "ex4.backward" in page


def test_overlap_counts_what_copydetects_compare_files_counts(klass):
    from copydetect import compare_files

    root, ids, *_ = klass
    _, prints, _ = similarity.fingerprint_class(_sources(root, ids))
    checked = sharing = 0
    for name in prints["copier"]:
        fps = [prints[s][name] for s in ids if name in prints[s] and prints[s][name].token_coverage]
        for x in fps:
            for y in fps:
                tokens, sims, _ = compare_files(x, y)
                assert similarity.overlap(x, y) == (tokens, sims), name
                checked, sharing = checked + 1, sharing + bool(tokens)
    assert checked > 5000 and sharing > 500, (checked, sharing)  # the class shares code, not only empty overlaps


def test_the_class_totals_give_every_pairs_own_score(klass):
    root, ids, *_ = klass
    sources = _sources(root, ids)
    chunks, prints, _ = similarity.fingerprint_class(sources)
    students = sorted(sources)
    brute = {
        (a, b): similarity._compare(a, b, prints[a], prints[b], chunks)
        for i, a in enumerate(students)
        for b in students[i + 1 :]
    }
    result = similarity.compare_class(sources)
    assert result.max_score == max(p.score for p in brute.values())
    saved = similarity.THRESHOLD, similarity.MIN_OVERLAP
    for threshold, least in ((0.3, 100), (0.5, 0), (0.0, 300)):
        similarity.THRESHOLD, similarity.MIN_OVERLAP = threshold, least
        try:
            listed = similarity.compare_class(sources).pairs
        finally:
            similarity.THRESHOLD, similarity.MIN_OVERLAP = saved
        expected = [p for p in brute.values() if p.score >= threshold and p.overlap >= least]
        assert [p.to_dict() for p in listed] == [
            p.to_dict() for p in sorted(expected, key=lambda p: (-p.score, p.a, p.b))
        ]
        assert 0 < len(listed) < len(brute), (threshold, least)


def test_copydetect_is_imported_without_matplotlib_which_still_imports_after():
    code = (
        "import sys; import grader.classroom.reports.similarity as s; assert 'matplotlib' not in sys.modules; "
        "assert 'jinja2' not in sys.modules; s._copydetect.CodeFingerprint; import matplotlib.pyplot as plt; "
        "assert callable(plt.plot); import jinja2; assert jinja2.Template('{{ x }}').render(x=1) == '1'; "
        "assert s._copydetect.detector.Template('{{ x }}').render(x=2) == '2'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_student_slow_to_read_is_left_out_of_the_comparison_alone(tmp_path, monkeypatch):
    import time

    from grader.classroom import deadline
    from grader.classroom.reports import class_similarity
    from grader.classroom.reports.html import _similarity
    from grader.submissions import intake
    from grader.submissions.intake import discover

    root = tmp_path / "class"
    ids = write_class(root, copy_of=3)
    entries, _ = discover(root)
    real = intake.read_entry

    def read_entry(entry):
        if entry.student == "indep05":  # a notebook built to make the grader's reading slow, say
            time.sleep(30)
        return real(entry)

    monkeypatch.setattr(intake, "read_entry", read_entry)
    monkeypatch.setattr(deadline, "SIMILARITY_READ", 0.5)
    found = class_similarity(entries)
    assert found["not_compared"] == ["indep05"]
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [("copier", "indep03")]
    assert found["compared_pairs"] == (len(ids) - 1) * (len(ids) - 2) // 2
    assert "indep05" in _similarity({"similarity": found}, {}) and "could not finish" in _similarity(
        {"similarity": {"error": "RuntimeError: boom"}}, {}
    )


def test_overlap_of_long_functions_counts_what_compare_files_counts():
    import random

    from copydetect import compare_files

    rng = random.Random(3)

    def long_function():
        lines = [
            f"    x{j} = a[{rng.randrange(4)}] * b[{rng.randrange(4)}] + c.sum({rng.randrange(3)})" for j in range(80)
        ]
        return similarity._fingerprint("def f(a, b, c):\n" + "\n".join(lines) + "\n")

    fps = [long_function() for _ in range(4)]
    assert all(len(fp.filtered_code) > similarity.MASK_CHARS for fp in fps)  # the path without cached masks
    for x in fps:
        for y in fps:
            tokens, sims, _ = compare_files(x, y)
            assert similarity.overlap(x, y) == (tokens, sims)
