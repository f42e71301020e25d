"""The trap corpus: wrong and right submissions, each pinning a verdict and its trap ids.

Every file in tests/corpus/<exercise>/ is a snippet appended to the reference solution of that exercise, so it
overrides one function; its first line says what the grader must conclude. Every other item of the exercise
must still pass with no trap.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import traps
from grader.runner import grade
from tests.conftest import CORPUS, with_snippet

CASES = sorted(CORPUS.glob("ex*/*.py"))
_EXPECT = re.compile(r"#\s*expect:\s*item=(\S+)\s+status=(\S+)\s+traps=(\S*)")


def expectation(path: Path) -> tuple[str, str, list[str]]:
    """Parse a corpus file's `# expect:` line."""
    match = _EXPECT.match(path.read_text().splitlines()[0])
    assert match, f"{path} must start with '# expect: item=... status=... traps=...'"
    item, status, ids = match.groups()
    return item, status, [t for t in ids.split(",") if t]


def test_corpus_is_there():
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_corpus_case(case: Path, tmp_path):
    item_id, status, expected = expectation(case)
    exercise = case.parent.name
    sub = with_snippet(tmp_path, exercise, case.read_text())
    result = grade(sub, [exercise])
    by_id = {i.id: i for i in result.items}
    item = by_id[item_id]
    assert (item.status, sorted(item.traps)) == (status, sorted(expected)), item.message
    assert item.message or status == "passed"
    for t in item.traps:  # every trap message the student sees comes from the catalogue
        assert t in traps.TRAPS
    for other in result.items:
        if other.id != item_id and not other.id.startswith("ex4."):
            assert other.status == "passed" and other.traps == [], f"{other.id}: {other.message}"


def test_every_trap_id_is_pinned_by_the_corpus():
    pinned = {t for case in CASES for t in expectation(case)[2]}
    assert pinned == set(traps.TRAPS)


def test_every_trap_is_pinned_in_two_styles():
    count: dict[str, int] = {}
    for case in CASES:
        for t in expectation(case)[2]:
            count[t] = count.get(t, 0) + 1
    assert {t: n for t, n in count.items() if n < 2} == {}
