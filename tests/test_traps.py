"""The trap corpus: wrong and right submissions, each pinning a verdict and its trap ids.

Every file in tests/corpus/<exercise>/ is a snippet appended to the reference solution of that exercise, so it
overrides one function; its first line says what the grader must conclude. Every other item of the exercise
must still pass with no trap.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.grading import runner, texts, traps
from grader.grading.results import ItemResult, SubmissionResult
from grader.grading.runner import grade
from grader.sandbox import forget
from grader.show import table
from grader.spec import catalogue
from grader.truth import fixture
from grader.truth.corpus import ITOS
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
        if item.traps:  # ... and no fix either: what is wrong and where, the fix is for hint
            assert not FIX.search(item.message), (FIX.search(item.message), item.message)
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


# a sentence (or clause) that starts by telling the student what to do: the fix, which diagnose leaves to hint
FIX = re.compile(
    r"(?:^|[.:;]\s+)(add|keep|work on|accumulate|remove|create|take|let|use|write|fix|give|expand|do not|subtract"
    r"|divide|replace|check|look for|make|return|start|sum|drop)\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize(
    "fix",
    [
        "Accumulate the contribution of every lookup.",
        "hpreact; write it with tanh's output h",
        "Keep the eps wherever you use the variance.",
        "Add the gradient that arrives through counts_sum",
        "Do not keep the summed dimension.",
    ],
)
def test_fix_pattern_catches_the_old_diagnose_fixes(fix):
    assert FIX.search(fix)


def test_diagnose_texts_of_every_trap_hold_no_fix():
    for trap in traps.TRAPS.values():
        assert not FIX.search(trap.diagnose), (trap.id, FIX.search(trap.diagnose), trap.diagnose)


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
# the texts are data, one file per level (grading/texts/), and a sandbox child forgets them


def _keys() -> dict[str, set[str]]:
    catalogue = texts.Catalogue(texts.FOLDER)
    return {level: catalogue.keys(level) for level in traps.LEVELS}


def test_every_trap_has_its_texts_in_the_level_files():
    keys = _keys()
    own = {level: {k for k in found if not k.startswith("detail.")} for level, found in keys.items()}
    assert own["diagnose"] == {f"{t}.{what}" for t in traps.TRAPS for what in ("message", "concept")}
    assert own["hint"] == {f"{t}.message" for t in traps.TRAPS}
    assert own["full"] == {f"{t}.explain" for t in traps.TRAPS}
    assert all(texts.text(k, level) for level, found in keys.items() for k in found)  # none empty
    assert {k.split(".")[1] for found in keys.values() for k in found if k.startswith("detail.")} <= set(traps.TRAPS)


def test_every_detail_text_is_one_a_recogniser_names():
    source = Path(traps.__file__).read_text()
    details = {tuple(k.split(".")[1:]) for found in _keys().values() for k in found if k.startswith("detail.")}
    named = set(re.findall(r'texts\.detail\(\s*"([\w-]+)",\s*"([\w-]+)"', source))
    named |= {("scaled", key) for _, _, key in traps._NAMED_FACTORS}
    assert named and named <= details
    assert [(trap, name) for trap, name in sorted(details) if f'"{name}"' not in source] == []  # no dead text


def test_a_catalogue_forgotten_reads_nothing_again(tmp_path):
    shutil.copy(texts.FOLDER / "diagnose.toml", tmp_path)
    unread = texts.Catalogue(tmp_path)
    unread.forget()  # before its first use: the file is there, and stays unread
    assert unread.text("tanh-preact.message", "full") == "" and unread.keys("diagnose") == set()
    used = texts.Catalogue(tmp_path)
    assert used.text("tanh-preact.message", "hint") == traps.TRAPS["tanh-preact"].diagnose  # hint.toml is absent
    used.forget()
    assert used.text("tanh-preact.message", "diagnose") == "" and used.keys("diagnose") == set()


def test_a_forked_child_forgets_every_text():
    assert traps.TRAPS["tanh-preact"].explain and texts.text("detail.scaled.two", "hint")  # the parent's
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # what a sandbox child does first
        try:
            forget.forget_all()
            trap = traps.TRAPS["tanh-preact"]
            said = [trap.diagnose, trap.hint, trap.explain, trap.concept, texts.text("detail.scaled.two", "hint")]
            said.append(traps.finding("shape-mismatch", shape="", var="", expected="", detail="").text("full"))
            os.write(w, json.dumps([said, sorted(texts.TEXTS.keys("diagnose"))]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said, keys = json.loads(f.read())
    os.waitpid(pid, 0)
    assert said == [""] * 6 and keys == []
    assert traps.TRAPS["tanh-preact"].explain  # the parent keeps its own


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


# ---------------------------------------------------------------------------------------------------------------
# the honest student is never hurt: every message true, precise, and at diagnose without the fix


def test_missing_one_hot_term_is_located_at_each_rows_label(tmp_path):
    item = _item(tmp_path, "ex2", "no_minus_one.py", "ex2.dlogits")
    yb = fixture.build(fixture.PRIMARY).Yb
    lead = traps.TRAPS["label-entries"].diagnose.split("{count}")[0]
    assert item.traps == ["label-entries"] and item.message.startswith(lead + f"all {yb.numel()} rows: ")
    for r in range(3):  # which entry, by row and label
        assert f"row {r} at column {int(yb[r])} ('{ITOS[int(yb[r])]}')" in item.message
    assert "Correct except" not in item.message and "entries differ" not in item.message
    assert "-1" not in item.message and "1/n" not in item.message  # the formula waits for hint
    hint = _item(tmp_path, "ex2", "no_minus_one.py", "ex2.dlogits", level="hint")
    assert texts.text("detail.label-entries.one-hot-missing", "hint").split(" = ")[0] in hint.message


@pytest.mark.parametrize(
    ("exercise", "case", "item_id", "trap"),
    [
        ("ex3", "closed_form_bessel_inverted.py", "ex3.dhprebn", "bessel-inverted"),
        ("ex4", "bn_bessel_inverted.py", "ex4.dW1", "bessel-inverted"),
        ("ex3", "mean_form_mean_over_n_minus_1.py", "ex3.dhprebn", "mean-divisor"),
        ("ex4", "bn_mean_divisor.py", "ex4.dW1", "mean-divisor"),
        ("ex3", "closed_form_sum_dim1.py", "ex3.dhprebn", "reduced-wrong-dim"),
        ("ex3", "mean_form_mean_dim1.py", "ex3.dhprebn", "reduced-wrong-dim"),
    ],
)
def test_batchnorm_slips_are_named(tmp_path, exercise, case, item_id, trap):
    item = _item(tmp_path, exercise, case, item_id)
    template = traps.TRAPS[trap].diagnose
    lead = template.split("}", 1)[1].split("{")[0]  # the words after the first detail
    assert item.traps == [trap] and lead in item.message, item.message
    assert "entries differ" not in item.message


def test_n_over_n_minus_1_in_front_is_named(tmp_path):
    item = _item(tmp_path, "ex3", "closed_form_front_n_minus_1.py", "ex3.dhprebn")
    label, advice = traps._name_factor(32 / 31, 32)
    assert item.traps == ["scaled"] and label in item.message and traps.pick(advice, "diagnose") in item.message


def test_ex4_tanh_preact_names_only_the_items_that_fail_with_it(tmp_path):
    sub = with_snippet(tmp_path, "ex4", (CORPUS / "ex4" / "tanh_preact.py").read_text())
    items = {i.name: i for i in grade(sub, ["ex4"]).items}
    failing = [k for k, i in items.items() if "tanh-preact" in i.traps]
    assert items["db1"].status == "passed" and set(failing) == {"dC", "dW1", "dbngain", "dbnbias"}
    lead = traps.TRAPS["tanh-preact"].diagnose.split("{where}")[0]
    for name in failing:
        message = items[name].message
        assert message.startswith(lead) and f"It reaches {name} through dhpreact." in message
        assert all(other in message for other in failing) and "db1" not in message, message


def test_ex4_autograd_is_said_once_with_the_students_line(tmp_path):
    sub = with_snippet(tmp_path, "ex4", (CORPUS / "ex4" / "uses_autograd.py").read_text())
    result = grade(sub, ["ex4"])
    assert [len(p["items"]) for p in result.problems] == [8]  # one problem for the whole call
    text = table.table(result, color=False)
    said = traps.TRAPS["uses-autograd"].diagnose.split("{calls}")[0]
    assert text.count(said) == 1
    line = next(k for k, s in enumerate(sub.joinpath("ex4.py").read_text().splitlines(), 1) if "requires_grad_" in s)
    assert f"Tensor.requires_grad_() at line {line}: `params = " in " ".join(text.split())


def test_asking_for_its_own_gradient_is_said_so(tmp_path):
    sub = with_snippet(tmp_path, "ex1", (CORPUS / "ex1" / "dprobs_asks_for_dprobs.py").read_text())
    item = {i.id: i for i in grade(sub, ["ex1"], only=["dprobs"]).items}["ex1.dprobs"]
    call = next(c for c in catalogue.CALLS["ex1"] if c.function == "dprobs")
    assert item.status == "error" and item.message == runner.own_gradient(call, "dprobs")
    assert "the very gradient it must compute" in item.message and "comes later" not in item.message


@pytest.mark.parametrize(
    ("case", "item_id", "fill"),
    [
        ("db1_sum_wrong_dim.py", "ex1.db1", {"noun": "a sum", "e": 1, "d": 0, "var": "b1"}),
        ("dbngain_mean_dim1.py", "ex1.dbngain", {"noun": "a mean", "e": 1, "d": 0, "var": "bngain"}),
    ],
)
def test_a_sum_over_the_wrong_dimension_is_named(tmp_path, case, item_id, fill):
    item = _item(tmp_path, "ex1", case, item_id)
    said = texts.text("detail.shape-mismatch.wrong-dim", "diagnose").format(**fill, along=traps._ALONG[fill["d"]])
    assert item.traps == ["shape-mismatch"] and item.message.endswith(said), item.message
    assert "do not match either" not in item.message


def test_the_dtype_message_says_where_float64_comes_from(tmp_path):
    item = _item(tmp_path, "ex2", "numpy_float64.py", "ex2.dlogits")
    assert item.status == "error" and item.message == runner.wrong_dtype(torch.float64)
    assert runner.DTYPE_ORIGIN["float64"] in item.message
    # what the message claims, checked with torch
    assert torch.tensor(1.5).dtype == torch.tensor([1.5, 2.0]).dtype == torch.float32  # Python floats: float32
    assert torch.tensor(np.ones(3)).dtype == torch.from_numpy(np.ones(3)).dtype == torch.float64  # numpy: float64
    with warnings.catch_warnings():  # numpy 2 warns about torch's __array_wrap__, not about the result
        warnings.simplefilter("ignore", DeprecationWarning)
        assert (torch.ones(3) + np.ones(3)).dtype == torch.float64
    assert (torch.ones(3) * torch.tensor(2.0, dtype=torch.float64)).dtype == torch.float32  # 0-dim: no promotion
    assert (torch.ones(3) * torch.ones(3, dtype=torch.float64)).dtype == torch.float64


def _result(*statuses) -> SubmissionResult:
    return SubmissionResult("s", [ItemResult(f"ex1.d{k}", "ex1", f"d{k}", s, [1], 1.0) for k, s in enumerate(statuses)])


def test_the_score_line_counts_in_a_fixed_order_with_plurals():
    assert list(table.SUMMARY_COUNTS) == ["passed", "failed", "error", "timeout", "not_attempted"]
    line = table.summary_line(_result("error", "not_attempted", "error", "timeout", "failed", "passed"))
    assert line == "score 1/6: 1 passed, 1 failed, 2 errors, 1 timed out, 1 not attempted"
    assert table.summary_line(_result(*["error"] * 26)) == "score 0/26: 26 errors"
    assert table.summary_line(_result("error", "passed")) == "score 1/2: 1 passed, 1 error"


def test_a_column_gradient_wrong_in_some_rows_is_located_not_a_crash(tmp_path):
    """An (n, 1) gradient has no label column: label-entries must not index column Yb in it."""
    snippet = (
        "def dcounts_sum(counts_sum, dcounts_sum_inv):\n"
        "    d = -counts_sum**-2 * dcounts_sum_inv  # (32, 1)\n"
        "    d[:3] *= 2\n"
        "    return d\n"
    )
    [item] = grade(with_snippet(tmp_path, "ex1", snippet), ("ex1",), only=["dcounts_sum"]).items
    assert item.status == "failed" and "label-entries" not in item.traps, (item.status, item.message)
    assert "rows 0, 1, 2" in item.message or "row 0" in item.message, item.message


class _EpsFixture:
    """A fixture's two answers that missing_eps reads: the eps-free variant and the truth's float32 rounding."""

    def __init__(self, wrong: torch.Tensor, noise: float):
        self.wrong, self.noise = wrong, noise

    def variant(self, v):
        return {"dbnvar": self.wrong}

    def rounding(self, grad: str) -> float:
        return self.noise


@pytest.mark.parametrize(
    "bump, noise, named",
    [
        (0.5e-8, 2e-7, True),  # within a tenth of the gap of the eps-free variant
        (1.5e-7, 2e-7, True),  # further than a tenth (another CPU's rounding), still within one rounding
        (3e-7, 2e-7, False),  # further than one rounding: not that mistake
        (1.5e-7, 3e-7, False),  # the variant is not four roundings from the truth: a right answer could pass for it
    ],
)
def test_missing_eps_allows_the_rounding_a_right_answer_has_and_no_more(bump, noise, named):
    from types import SimpleNamespace

    truth = torch.zeros(1, 64)
    wrong = truth.clone()
    wrong[0, :3] = 1e-6  # eps matters in three columns
    value = wrong.clone()
    value[0, 10] += bump  # the student's own ops round otherwise than autograd's variant
    ev = traps.Evidence("ex1.dbnvar", "bnvar", value, truth, _EpsFixture(wrong, noise), SimpleNamespace(shape_ok=True))
    found = traps.missing_eps(ev)
    assert [f.trap for f in found] == (["missing-eps"] if named else [])
