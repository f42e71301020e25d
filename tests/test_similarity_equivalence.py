"""Similarity: the class-wide shortcuts give what the plain steps give (issue #22).

_shares gives overlap's numbers for every pair of a function's texts, compare_class leaves the garbage collector
as it found it, and a file's Dropped verdict is kept without its traceback. tests/test_similarity.py pins the rest
(overlap is compare_files, the class totals are every pair's own score).
"""

from __future__ import annotations

import gc

import pytest

from grader.classroom.reports import similarity
from tests.independent import copied_and_renamed, student_files


def test_shares_are_overlaps():
    sources = {f"s{k}": {ex.removesuffix(".py"): t for ex, t in student_files(k).items()} for k in range(8)}
    sources["copy"] = {ex.removesuffix(".py"): t for ex, t in copied_and_renamed(student_files(2)).items()}
    _, prints, _ = similarity.fingerprint_class(sources)
    checked = 0
    for name in sorted({n for p in prints.values() for n in p}):
        texts = list({id(p[name]): p[name] for p in prints.values() if name in p and p[name].token_coverage}.values())
        if texts:
            got = similarity._shares(texts)
            want = [[int(similarity.overlap(x, y)[0]) for y in texts] for x in texts]
            assert got.tolist() == want, name
            checked += len(texts) ** 2
    assert checked > 200


def test_compare_class_leaves_the_garbage_collector_as_it_found_it():
    sources = {f"s{k}": {ex.removesuffix(".py"): t for ex, t in student_files(k).items()} for k in range(3)}
    assert gc.isenabled()
    similarity.compare_class(sources)
    assert gc.isenabled()
    gc.disable()
    try:
        similarity.compare_class(sources)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_kept_verdict_holds_no_traceback():
    deep = {"ex2": "def dlogits(logits):\n    return " + "-" * 300 + "logits\n"}
    memo: dict = {}
    for _ in range(2):  # read, then from the memo
        with pytest.raises(similarity.Dropped, match="nested more than"):
            similarity.student_chunks(deep, memo)
    assert memo["ex2", deep["ex2"]].__traceback__ is None
