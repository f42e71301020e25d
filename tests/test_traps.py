"""The trap corpus: wrong and right submissions, each pinning a verdict and its trap ids.

Every file in tests/corpus/<exercise>/ is a snippet appended to the reference solution of that exercise, so it
overrides one function; its first line says what the grader must conclude. Every other item of the exercise
must still pass with no trap.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.grading import traps
from grader.grading.runner import grade
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
    if "uses-autograd" not in item.traps:  # that one quotes the student's own call, which gives nothing away
        assert not FORMULA.search(item.message), item.message  # grade's default level is diagnose: no answer line
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


# ---------------------------------------------------------------------------------------------------------------
# message levels: diagnose says what is wrong and where, never the formula

# fragments of code or algebra: a power, a matmul, a transpose, a product or quotient of names, an assignment or
# augmented assignment, a call, an index
FORMULA = re.compile(r"\*\*|@|\.T\b|\w\s[*/]\s\w|\b\w{1,2}[*/]\w|[-+*/]=|(?<![<>=!])=(?!=)|\w\(|\w\[")


@pytest.mark.parametrize(
    "answer",
    ["2 * bndiff * dbndiff2", "1 - h**2", "dA = dout @ B.T", "dC[Xb] += demb", "x.sum(0, keepdim=True)", "1/n"],
)
def test_formula_pattern_catches_answer_lines(answer):
    assert FORMULA.search(answer)


def test_diagnose_texts_of_every_trap_hold_no_formula():
    for trap in traps.TRAPS.values():
        for text in (trap.diagnose, trap.concept):
            assert not FORMULA.search(text.replace("{{}}", "")), (trap.id, FORMULA.search(text), text)


def test_hint_and_full_still_give_the_formula(tmp_path):
    sub = with_snippet(tmp_path, "ex1", (CORPUS / "ex1" / "dhpreact_tanh_preact.py").read_text())
    by_level = {
        level: {i.id: i for i in grade(sub, ["ex1"], only=["dhpreact"], level=level).items}["ex1.dhpreact"]
        for level in traps.LEVELS
    }
    assert "1 - h**2" not in by_level["diagnose"].message and "h" in by_level["diagnose"].message
    assert "1 - h**2" in by_level["hint"].message
    assert "dhpreact = (1 - h**2) * dh" in by_level["full"].message  # the answer line, only at full
    assert by_level["diagnose"].hints == [traps.TRAPS["tanh-preact"].concept]
    assert by_level["hint"].hints == [traps.TRAPS["tanh-preact"].explain]
    with pytest.raises(ValueError, match="diagnose, hint, full"):
        grade(sub, ["ex1"], only=["dhpreact"], level="everything")


# ---------------------------------------------------------------------------------------------------------------
# one precise message per mistake


def _item(tmp_path, exercise, case, item_id, level="diagnose"):
    sub = with_snippet(tmp_path, exercise, (CORPUS / exercise / case).read_text())
    only = None if exercise in ("ex3", "ex4") else [item_id.split(".")[1]]
    return {i.id: i for i in grade(sub, [exercise], only=only, level=level).items}[item_id]


def test_keepdim_too_many_says_drop_it(tmp_path):
    item = _item(tmp_path, "ex1", "db1_keepdim.py", "ex1.db1", level="hint")
    assert "drop keepdim=True" in item.message and "extra dimension 0 of size 1" in item.message
    assert "broadcast along" not in item.message and "match after .sum(0)" not in item.message


def test_lost_keepdim_on_a_column_says_keepdim_not_view(tmp_path):
    item = _item(tmp_path, "ex1", "dcounts_sum_inv_no_keepdim.py", "ex1.dcounts_sum_inv", level="hint")
    assert ".sum(1, keepdim=True)" in item.message and ".view(" not in item.message


def test_missing_eps_is_named_with_its_columns(tmp_path):
    item = _item(tmp_path, "ex1", "dbnvar_missing_eps.py", "ex1.dbnvar")
    lead = traps.TRAPS["missing-eps"].diagnose.split("{where}")[0]
    assert item.traps == ["missing-eps"] and item.message.startswith(lead) and "in columns" in item.message
    assert "rows 0" not in item.message


def test_one_row_tensor_is_located_by_columns_not_rows():
    truth = torch.linspace(1.0, 2.0, 64).view(1, 64)  # (1, 64)
    value = truth.clone()
    value[0, [3, 9]] += 0.5
    where = traps.locate(value, truth)
    assert where.startswith("Correct except columns 3, 9.") and "rows" not in where
    column = truth.view(64, 1).clone()  # (64, 1)
    column[[5, 7]] += 0.5
    assert traps.locate(column, truth.view(64, 1)).startswith("Correct except rows 5, 7.")


@pytest.mark.parametrize(
    ("exercise", "case", "item_id", "factor"),
    [
        ("ex3", "closed_form_no_bngain.py", "ex3.dhprebn", "divided by bngain"),
        ("ex3", "closed_form_no_bnvar_inv.py", "ex3.dhprebn", "divided by bnvar_inv"),
        ("ex1", "dprobs_missing_division.py", "ex1.dprobs", "times probs"),
    ],
)
def test_missing_factor_names_the_tensor(tmp_path, exercise, case, item_id, factor):
    item = _item(tmp_path, exercise, case, item_id)
    assert item.traps == ["missing-factor"] and factor in item.message
    assert "entries differ" not in item.message


def test_broadcast_logit_maxes_path_gets_a_note(tmp_path):
    item = _item(tmp_path, "ex1", "dlogits_max_broadcast.py", "ex1.dlogits")
    assert item.status == "passed" and item.traps == ["dlogits-max-broadcast"]
    assert item.message.startswith(traps.TRAPS["dlogits-max-broadcast"].diagnose.split("{rows}")[0])


def test_transposed_is_said_once(tmp_path):
    item = _item(tmp_path, "ex1", "dW2_transposed.py", "ex1.dW2")
    assert item.message.count("ight but transposed") == 1, item.message
    assert "  " not in item.message


def test_compare_checks_broadcasting_by_hand_without_sympy():
    code = (
        "import sys, torch\n"
        "from grader.grading import compare\n"
        "c = compare.compare(torch.ones(64), torch.ones(1, 64))\n"
        "d = compare.compare(torch.ones(1, 64), torch.ones(64))\n"
        "e = compare.compare(torch.ones(32), torch.ones(32, 1))\n"
        "print(c.broadcast_match, d.broadcast_match, e.broadcast_match, 'sympy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False", "False"]  # torch.broadcast_shapes would import sympy
