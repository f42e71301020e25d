"""Notebooks as submissions: the lecture's cells, converted to the exercise functions and graded."""

from __future__ import annotations

import json
import zipfile
from html import escape as html_escape
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from grader.classroom.batch import grade_batch
from grader.cli.main import main
from grader.grading.runner import grade
from grader.sandbox import Limits
from grader.ship.student_notebook import write_student_notebook
from grader.submissions.notebook import history_sources, notebook_sources
from grader.submissions.notebook import messages as msg
from grader.submissions.sources import Submission
from tests.conftest import REFERENCE
from tests.notebooks import lecture

EX1_CELL = "cell 11"  # where lecture_cells() puts the Ex1 cell (markdown counts: cells are numbered as on screen)


def _graded(tmp_path: Path, cells, exercises=("ex1", "ex2", "ex3", "ex4"), only=None, name="hw.ipynb"):
    path = lecture.write(tmp_path / name, cells)
    sources, notes = notebook_sources(path)
    result = grade(Submission(path.stem, sources, notes), exercises, only=only)
    return {i.id: i for i in result.items}, sources, notes


def _ex1_cell(cells) -> int:
    return next(k for k, (_, text) in enumerate(cells) if text.startswith("# Exercise 1"))


@pytest.fixture(scope="module")
def lecture_result(tmp_path_factory):
    return _graded(tmp_path_factory.mktemp("lecture"), lecture.lecture_cells())


def test_lecture_notebook_is_graded_as_the_lecture_deserves(lecture_result):
    items, _, _ = lecture_result
    assert len(items) == 36
    failed = {i: item for i, item in items.items() if item.status != "passed"}
    assert list(failed) == ["ex1.dbnmeani"], {i: (x.status, x.message) for i, x in failed.items()}
    assert failed["ex1.dbnmeani"].status == "failed"
    assert failed["ex1.dbnmeani"].traps == ["shape-mismatch"]
    assert failed["ex1.dbnmeani"].shape == [64]


def test_each_exercise_takes_its_own_cells_and_says_which(lecture_result):
    _, sources, notes = lecture_result
    labels = {ex: s.label for ex, s in sources.items()}
    assert labels == {"ex1": f"hw.ipynb {EX1_CELL}", "ex2": "hw.ipynb cell 13", "ex3": "hw.ipynb cell 17"} | {
        "ex4": "hw.ipynb cell 19"
    }
    assert "ex2: graded hw.ipynb cell 13 (dlogits)" in notes
    assert "ex1: graded hw.ipynb cell 11 (26 of 26 gradients)" in notes
    # Ex2's dlogits is its own cell's softmax, not Ex1's dnorm_logits path
    assert "F.softmax(logits, 1)" in sources["ex2"].text and "dnorm_logits" not in sources["ex2"].text


def test_a_gradient_is_its_statements_and_its_parameters_the_names_they_read(lecture_result):
    _, sources, _ = lecture_result
    ex1 = sources["ex1"]
    lines = ex1.text.splitlines()
    k = lines.index("def dcounts(counts_sum_inv, dprobs, counts, dcounts_sum):")
    assert lines[k + 1 : k + 4] == [
        "    dcounts = counts_sum_inv * dprobs",
        "    dcounts += torch.ones_like(counts) * dcounts_sum",
        "    return dcounts",
    ]
    assert ex1.where(k + 2) == f"{EX1_CELL}, line 8" and ex1.where(k + 3) == f"{EX1_CELL}, line 10"
    assert "def dC(C, Xb, demb):" in lines  # the loop variables k, j and ix stay local
    # nothing but the needed statements and the notebook's allowed imports: no shell, no data loading, no plots
    for text in (s.text for s in sources.values()):
        assert "wget" not in text and "open(" not in text and "matplotlib" not in text and "cmp(" not in text


def test_ex4_backward_is_the_manual_backprop_only(lecture_result):
    _, sources, _ = lecture_result
    text = sources["ex4"].text
    assert "def backward(" in text and "loss = F.cross_entropy" not in text and "p.data" not in text
    assert "loss.backward()" not in text  # commented out in the lecture's loop
    assert "return dict(zip(['dC', 'dW1', 'db1', 'dW2', 'db2', 'dbngain', 'dbnbias'], grads))" in text


def test_dC_index_add_with_repeated_rows_is_caught(tmp_path):
    items, _, _ = _graded(tmp_path, lecture.lecture_cells(dc=lecture.DC_REPEATED), ("ex1",), only=["dC"])
    assert items["ex1.dC"].status == "failed"
    assert items["ex1.dC"].traps == ["dC-repeated-rows"]


def test_active_loss_backward_in_the_training_loop_uses_autograd(tmp_path):
    items, sources, _ = _graded(tmp_path, lecture.lecture_cells(autograd=True), ("ex4",))
    assert "loss.backward()" in sources["ex4"].text
    for item in items.values():
        assert (item.status, item.traps) == ("failed", ["uses-autograd"]), item.id


def test_statements_that_cannot_be_placed_are_error_items_that_quote_the_line(tmp_path):
    cells = lecture.lecture_cells(dc="dC = torch.zeros((vocab_size, n_embd))\ndC.index_add_(0, Xb.view(-1), demb)")
    k = _ex1_cell(cells)
    text = cells[k][1].replace("dW2 = h.T @ dlogits\ndb2 = dlogits.sum(0)", "dW2, db2 = h.T @ dlogits, dlogits.sum(0)")
    cells[k] = ("code", text.replace("dh = dlogits @ W2.T", "dh = dlogits @ W2.T * scale"))
    items, _, notes = _graded(tmp_path, cells, ("ex1",), only=["dh", "dW2", "db2", "dC", "dhpreact"])
    assert items["ex1.dhpreact"].status == "passed"
    for name in ("dh", "dW2", "db2", "dC"):
        assert items[f"ex1.{name}"].status == "error", name
    assert items["ex1.dW2"].message == msg.TWO_AT_ONCE.format(
        where=f"{EX1_CELL}, line 16",
        code="dW2, db2 = h.T @ dlogits, dlogits.sum(0)",
        names="`dW2` and `db2`",
        first="dW2",
    )
    assert items["ex1.dh"].message.startswith(f"{EX1_CELL}, line 15: `dh = dlogits @ W2.T * scale` uses `scale`")
    assert "`vocab_size`, which is defined in cell 5" in items["ex1.dC"].message
    assert any(n.startswith("ex1: 4 gradient function(s) could not be built") for n in notes)


def test_a_cell_that_is_not_python_errors_its_exercise_with_the_cell_named(tmp_path):
    cells = lecture.lecture_cells()
    k = next(i for i, (_, t) in enumerate(cells) if t == lecture.EX2)
    cells[k] = ("code", lecture.EX2.replace("dlogits /= n", "dlogits /= n)"))
    items, sources, notes = _graded(tmp_path, cells, ("ex2",))
    assert items["ex2.dlogits"].status == "error" and items["ex2.dlogits"].scope == "file"
    at = msg.BROKEN_AT_LINE.format(where="cell 13, line 5", code="dlogits /= n)")
    assert items["ex2.dlogits"].message == msg.BROKEN_CELL.format(at=at, error="unmatched ')'", exercise="ex2")
    assert sources["ex2"].label == "hw.ipynb cell 13"
    assert not any("not valid Python" in n for n in notes), notes  # said once: by the exercise's item


def test_a_notebook_of_stub_functions_is_graded_as_is(tmp_path):
    cells = [("code", "import torch\nimport torch.nn.functional as F")]
    for k in range(1, 5):
        cells += [("markdown", f"## Exercise {k}"), ("code", (REFERENCE / f"ex{k}.py").read_text())]
    items, sources, _ = _graded(tmp_path, cells)
    assert all(i.status == "passed" for i in items.values()), {i: x.message for i, x in items.items() if x.message}
    assert sources["ex2"].label == "hw.ipynb cell 5" and sources["ex4"].label == "hw.ipynb cell 9"


def test_history_takes_the_latest_run_of_each_cell():
    ex2_wrong = lecture.EX2.replace("dlogits /= n", "dlogits /= 2 * n")
    inputs = ["import torch\nimport torch.nn.functional as F", ex2_wrong, "check('ex2')", lecture.EX2, lecture.EX3]
    sources, notes = history_sources(inputs, [1, 2, 3, 5, 8])
    assert "2 * n" not in sources["ex2"].text and sources["ex2"].label == "In [5]"
    assert sources["ex3"].label == "In [8]" and sources["ex3"].where(9) == "In [8], line 3"
    assert "ex1: no cell assigns any of dlogprobs .. dC (a placeholder `= None` does not count)" in notes


def test_lecture_placeholders_count_as_not_attempted():
    sources, _ = history_sources(["import torch", "dlogits = None # TODO", "dC, dW1 = None, None"])
    assert sources == {}


def test_grade_command_takes_a_notebook_or_a_folder_holding_one(tmp_path):
    (tmp_path / "nb").mkdir()
    path = lecture.write(tmp_path / "nb" / "hw.ipynb", lecture.lecture_cells())
    runner = CliRunner()
    for target in (path, path.parent):
        out = runner.invoke(main, ["ex3", "--submission", str(target), "--json"])
        assert out.exit_code == 0, out.output
        data = json.loads(out.stdout)
        assert data["graded_files"]["ex3"] == "hw.ipynb cell 17"
        assert [i["status"] for i in data["items"]] == ["passed"]


def test_batch_mixes_notebooks_folders_and_zips_identically_whatever_jobs(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    lecture.write(subs / "ada.ipynb", lecture.lecture_cells())
    (subs / "ben").mkdir()
    for f in REFERENCE.glob("ex*.py"):
        (subs / "ben" / f.name).write_text(f.read_text())
    with zipfile.ZipFile(subs / "cleo.zip", "w") as z:
        z.writestr("work/backprop.ipynb", nbformat.writes(lecture.notebook(lecture.lecture_cells(autograd=True))))
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"out{jobs}"
        grade_batch(subs, out, jobs=jobs, limits=Limits(timeout=5), progress=False, similarity=False)
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    scores = {s: json.loads(outs[0][f"students/{s}.json"])["score"] for s in ("ada", "ben", "cleo")}
    assert scores == {"ada": 41, "ben": 42, "cleo": 31}


def test_student_notebook_is_valid_and_has_a_check_after_each_exercise(tmp_path):
    path = write_student_notebook(tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    for ex, marker in (("ex1", "# Exercise 1"), ("ex2", "# Exercise 2"), ("ex3", "# Exercise 3"), ("ex4", "backprop")):
        k = code.index(f'check("{ex}")')
        assert marker in code[k - 1]
    assert notebook_sources(path)[0] == {}  # nothing answered yet: every exercise is not attempted


def test_gradescope_grades_an_uploaded_notebook(tmp_path):
    from grader.ship import gradescope

    (tmp_path / "submission" / ".ipynb_checkpoints").mkdir(parents=True)
    lecture.write(tmp_path / "submission" / "hw.ipynb", lecture.lecture_cells(dc=lecture.DC_REPEATED))
    lecture.write(tmp_path / "submission" / ".ipynb_checkpoints" / "hw-checkpoint.ipynb", [])
    out = gradescope.run(tmp_path)
    assert "ex1: graded hw.ipynb cell 11 (26 of 26 gradients)" in out["output"]
    assert "checkpoint" not in out["output"]
    assert out["score"] == 40  # the lecture's 41, less dC for dC[Xb] += demb


def test_a_runtime_error_names_the_notebook_cell_and_line(tmp_path):
    cells = lecture.lecture_cells()
    k = _ex1_cell(cells)
    cells[k] = ("code", cells[k][1].replace("dbnbias = dhpreact.sum(0, keepdim=True)", "dbnbias = dhpreact.sum(5)"))
    items, _, _ = _graded(tmp_path, cells, ("ex1",), only=["dbnbias"])
    assert items["ex1.dbnbias"].status == "error"
    assert items["ex1.dbnbias"].message.endswith(f"at {EX1_CELL}, line 21: `dbnbias = dhpreact.sum(5)`.")


def test_without_exercise_markers_the_content_decides():
    cells = [c for c in lecture.lecture_cells() if c[0] == "code"]
    cells = [("code", "\n".join(ln for ln in t.splitlines() if "Exercise" not in ln)) for _, t in cells]
    sources, _ = history_sources([t for _, t in cells])
    labels = {ex: s.label for ex, s in sources.items()}
    # the same cells as with the markers (cell k of the file is In [k - 1]: the title cell is markdown)
    assert labels == {"ex1": "In [10]", "ex2": "In [12]", "ex3": "In [16]", "ex4": "In [18]"}


def test_check_is_importable_callable_and_refuses_to_run_outside_a_kernel():
    import grader.cli.check as module
    from grader.cli import check

    assert callable(check) and callable(module)
    with pytest.raises(ValueError, match="check\\(\\) takes"):
        check("ex5")
    with pytest.raises(RuntimeError, match="Jupyter, Colab or IPython kernel"):
        check("ex2")


@pytest.mark.timeout(60)
def test_cells_built_to_make_the_patterns_backtrack_are_read_in_linear_time(tmp_path):
    """The grader reads cells itself: 30,000 '#' in one cell took 35 s, 400,000 hours."""
    from tests.notebooks import lecture

    cells = lecture.lecture_cells()
    for text in ("#" * 400_000, "\n" * 400_000, "# exercise" + " " * 400_000, "d" + " " * 400_000 + "\n"):
        cells.insert(1, ("code", text))
    path = tmp_path / "hw.ipynb"
    lecture.write(path, cells)
    sources, _ = notebook_sources(path)
    assert sorted(sources) == ["ex1", "ex2", "ex3", "ex4"]


def test_a_notebook_built_to_make_conversion_slow_or_huge_is_bounded(tmp_path):
    """A chain of helpers stops at MAX_HELPERS per gradient; a notebook of 500,000 `1;` is refused unparsed."""
    from grader.submissions.notebook.build import MAX_HELPERS
    from grader.submissions.notebook.cells import MAX_CODE_LINES

    chain = "\n".join(f"a{k + 1} = a{k}" for k in range(2 * MAX_HELPERS)) + f"\ndlogprobs = a{2 * MAX_HELPERS}\n"
    cells = [("code", "a0 = n\n" + chain)]
    path = lecture.write(tmp_path / "chain.ipynb", cells)
    sources, _ = notebook_sources(path)
    text = sources["ex1"].text
    assert msg.TOO_MANY_HELPERS.format(where="cell 1, line 602", name="dlogprobs", count=MAX_HELPERS) in text
    path = lecture.write(tmp_path / "semicolons.ipynb", [("code", "1;" * (MAX_CODE_LINES + 1))])
    sources, notes = notebook_sources(path)
    assert not sources and any(f"at most {MAX_CODE_LINES:,} are read" in n for n in notes), notes


def test_a_notebook_with_a_byte_order_mark_is_read(tmp_path):
    path = lecture.write(tmp_path / "hw.ipynb", lecture.lecture_cells())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    sources, notes = notebook_sources(path)
    assert sorted(sources) == ["ex1", "ex2", "ex3", "ex4"], notes


def _with(cells, old: str, new: str):
    """Return the cells with one text replaced in the cell that holds it."""
    hits = [k for k, (_, text) in enumerate(cells) if old in text]
    assert len(hits) == 1, old
    kind, text = cells[hits[0]]
    return [*cells[: hits[0]], (kind, text.replace(old, new)), *cells[hits[0] + 1 :]]


def test_ex4_backprop_may_read_a_forward_value_its_own_loop_computes(tmp_path):
    """`bndiff = hprebn - bnmean` in the loop's forward, read by the backprop: the grader computes it too."""
    cells = _with(
        lecture.lecture_cells(),
        "bnraw = (hprebn - bnmean) * bnvar_inv",
        "bndiff = hprebn - bnmean\n        bnraw = bndiff * bnvar_inv",
    )
    cells = _with(cells, "        dbngain = (bnraw * dhpreact)", "        dbngain = (bndiff * bnvar_inv * dhpreact)")
    items, sources, _ = _graded(tmp_path, cells, exercises=("ex4",))
    assert all(i.status == "passed" for i in items.values()), {k: i.message for k, i in items.items()}
    assert "bndiff = hprebn - bnmean" in sources["ex4"].text


def test_a_pasted_stub_file_gives_way_to_the_cells_that_compute_the_gradients(tmp_path):
    cells = lecture.lecture_cells()
    k = _ex1_cell(cells)
    stub = (Path(__file__).parents[1] / "exercises" / "ex1.py").read_text()
    items, _, notes = _graded(tmp_path, [*cells[:k], ("code", stub), *cells[k:]], exercises=("ex1",))
    assert sum(i.status == "passed" for i in items.values()) >= 25, notes  # the lecture's own dbnmeani aside
    stub_only = [("code", stub)]
    (tmp_path / "only").mkdir()
    items, _, _ = _graded(tmp_path / "only", stub_only, exercises=("ex1",))
    assert all(i.status == "not_attempted" for i in items.values())


def test_ex3_worked_through_batchnorms_steps_is_ex3_and_hides_no_ex1_answer(tmp_path):
    """An unmarked cell in Ex3's section computing dhprebn through dbnraw: Ex3's, with dbnraw worked out there.

    Counted as Ex1 it left Ex3 ungraded and its fresh `dhprebn = ...` replaced Ex1's own (a wrong one passed).
    """
    ex3 = (
        "dbnraw = bngain * dhpreact\n"
        "dhprebn = bnvar_inv/n * (n*dbnraw - dbnraw.sum(0) - n/(n-1)*bnraw*(dbnraw*bnraw).sum(0))\n"
    )
    cells = _with(lecture.lecture_cells(), lecture.EX3, ex3)
    k = _ex1_cell(cells)
    kind, text = cells[k]
    cells[k] = (kind, text.replace("dhprebn = dbndiff.clone()", "dhprebn = 2 * dbndiff.clone()"))  # a wrong Ex1 step
    assert cells[k][1] != text
    items, sources, notes = _graded(tmp_path, cells, exercises=("ex1", "ex3"))
    assert items["ex3.dhprebn"].status == "passed", (items["ex3.dhprebn"].message, notes)
    assert "dbnraw = bngain * dhpreact" in sources["ex3"].text
    assert items["ex1.dhprebn"].status == "failed"


def test_ex2_worked_through_the_losss_steps_is_ex2(tmp_path):
    """An unmarked cell in Ex2's section that also assigns dlogprobs was merged into Ex1: Ex2 went ungraded."""
    ex2 = (
        "dlogprobs = torch.zeros_like(logits)\n"
        "dlogprobs[range(n), Yb] = -1.0/n\n"
        "dlogits = F.softmax(logits, 1)\n"
        "dlogits[range(n), Yb] -= 1\n"
        "dlogits /= n\n"
    )
    cells = _with(lecture.lecture_cells(), lecture.EX2, ex2)
    items, sources, notes = _graded(tmp_path, cells, exercises=("ex1", "ex2"))
    assert items["ex2.dlogits"].status == "passed", notes
    assert sum(i.status == "passed" for i in items.values()) == 26  # Ex1 still its own cell (dbnmeani aside)


# --- the honest student is never hurt: cells, not files; the order cells ran in; the course's points ---------


def _check(monkeypatch, inputs: list[str], numbers: list[int] | None = None, *args, **kwargs):
    """Run check() on a made-up kernel history; return what it displayed (a CheckReport)."""
    import IPython.display

    import grader.cli.check as module

    shown = []
    numbers = numbers or list(range(1, len(inputs) + 1))
    monkeypatch.setattr(module, "kernel_history", lambda: (list(inputs), list(numbers)))
    monkeypatch.setattr(IPython.display, "display", shown.append)
    module.check(*args, **kwargs)
    (report,) = shown
    return report


def _everything_said(report) -> str:
    """Return all a student sees of a check(): its text table, its HTML table and the item messages, each run of
    white space as one space (the text table wraps at the terminal's width)."""
    return " ".join(" ".join([repr(report), report._repr_html_(), *(i.message for i in report.result.items)]).split())


IMPORTS = "import torch\nimport torch.nn.functional as F"


def test_check_before_any_ex1_cell_ran_speaks_of_cells_once(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    report = _check(monkeypatch, [IMPORTS, lecture.EX2], None, "ex1")
    wanted = msg.NOT_RUN.format(source=msg.IN_KERNEL, names=msg.WANTED["ex1"], number="1")
    assert {(i.status, i.message) for i in report.result.items} == {("not_attempted", wanted)}
    html = report._repr_html_()
    assert html.count(html_escape(wanted)) == 1  # above the table, once for the 26 items
    assert "<b>ex1</b> (26 items todo)" in html and repr(report).startswith("ex1 (26 items todo): No cell run")
    assert msg.NOT_FOUND.format(exercise="ex1", names=msg.WANTED["ex1"]) not in report.notes  # the table says it
    assert ".py" not in _everything_said(report)


def test_check_names_a_broken_cell_and_a_missing_gradient_by_their_cells(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    ex1 = "\n".join(line for line in lecture.EX1.format(dC="").splitlines() if not line.startswith("cmp("))
    broken = lecture.EX3.replace("dhprebn = bngain", "dhprebn = (bngain")
    inputs = [IMPORTS, ex1, lecture.EX2, "check('ex2')", lecture.EX3_FORWARD, broken]
    report = _check(monkeypatch, inputs, [1, 4, 5, 6, 8, 9])
    items = {i.id: i for i in report.result.items}
    code = broken.splitlines()[2]
    at = msg.BROKEN_AT_LINE.format(where="In [9], line 3", code=code[:87] + " ...")
    said = msg.BROKEN_CELL.format(at=at, error="'(' was never closed", exercise="ex3")
    assert (items["ex3.dhprebn"].status, items["ex3.dhprebn"].message) == ("error", said)
    assert _everything_said(report).count("was never closed") == 3  # once in the text, the HTML and the item
    assert not any("not valid Python" in n for n in report.notes)
    assert items["ex1.dC"].status == "not_attempted"
    assert items["ex1.dC"].message == msg.GRADIENT_NOT_RUN.format(source=msg.IN_KERNEL, name="dC")
    assert items["ex1.dhprebn"].status == "passed" and items["ex2.dlogits"].status == "passed"
    ex4 = msg.NOT_RUN.format(source=msg.IN_KERNEL, names=msg.WANTED["ex4"], number="4")
    assert {i.message for i in report.result.items if i.exercise == "ex4"} == {ex4}
    assert ".py" not in _everything_said(report)


def _counted(cells, counts: dict[int, int]):
    """Return the lecture notebook with execution counts: code cells numbered in order, some set by cell number."""
    nb = lecture.notebook(cells)
    k = 0
    for number, cell in enumerate(nb.cells, start=1):
        if cell.cell_type == "code":
            k += 1
            cell.execution_count = counts.get(number, k)
    return nb


def test_a_saved_notebook_run_out_of_order_is_graded_top_to_bottom_and_says_so(tmp_path):
    cells = lecture.lecture_cells()
    k = _ex1_cell(cells)  # cell k + 1 on screen
    # a second dC cell just below Ex1's, run before it: top to bottom it is the one that counts
    cells.insert(k + 1, ("code", lecture.DC_REPEATED))
    path = tmp_path / "hw.ipynb"
    nbformat.write(_counted(cells, {k + 1: 30}), str(path))
    sources, notes = notebook_sources(path)
    note = msg.FILE_ORDER.format(above=30, above_cell=f"cell {k + 1}", below=11, below_cell=f"cell {k + 2}")
    assert notes[0] == note, notes
    result = grade(Submission("hw", sources, notes), ("ex1",), only=["dC"])
    assert [(i.status, i.traps) for i in result.items] == [("failed", ["dC-repeated-rows"])]
    in_order = tmp_path / "in_order.ipynb"
    nbformat.write(_counted(lecture.lecture_cells(), {}), str(in_order))
    assert not any(n.startswith("cells ran out of order") for n in notebook_sources(in_order)[1])


def test_check_says_it_grades_in_the_order_the_kernel_ran_the_cells():
    ex1 = lecture.EX1.format(dC=lecture.DC_LOOP)
    _, notes = history_sources([IMPORTS, lecture.EX2, ex1], [1, 3, 9])
    late, early = {"late": "In [9]", "late_exercise": "Exercise 1"}, {"early": "In [3]", "early_exercise": "Exercise 2"}
    assert notes[0] == msg.KERNEL_ORDER.format(**late, **early)
    _, notes = history_sources([IMPORTS, ex1, lecture.EX2], [1, 3, 9])
    assert not any(n.startswith("cells ran out of order") for n in notes)


def test_checks_table_shows_points_as_the_course_sets_them(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    report = _check(monkeypatch, [IMPORTS, lecture.EX2], None, "ex2")
    assert "<th style='padding:2px 8px;text-align:left;vertical-align:top'>points</th>" in report._repr_html_()
    assert ">2/2</td>" in report._repr_html_() and " 2/2 " in repr(report)  # the grader's own points
    (tmp_path / "course.toml").write_text('[points]\n"ex2.dlogits" = 5\n')
    report = _check(monkeypatch, [IMPORTS, lecture.EX2], None, "ex2")
    assert ">5/5</td>" in report._repr_html_() and " 5/5 " in repr(report)
    assert msg.CHECK_COURSE.format(path=tmp_path / "course.toml") in report.notes
    (tmp_path / "other.toml").write_text('[points]\n"ex2.dlogits" = 3\n')
    report = _check(monkeypatch, [IMPORTS, lecture.EX2], None, "ex2", course=str(tmp_path / "other.toml"))
    assert ">3/3</td>" in report._repr_html_()


def test_a_notebooks_sys_and_types_imports_are_kept_only_for_what_their_stand_ins_offer(tmp_path):
    """`import sys` and `from sys import stderr` reach the graded file; `from sys import exc_info` is dropped, as a
    blocked import is (it would fail the file's load)."""
    cells = lecture.lecture_cells()
    extra = "import sys\nfrom sys import stderr\nfrom sys import exc_info\nfrom types import FunctionType\n"
    cells.insert(1, ("code", extra))
    path = lecture.write(tmp_path / "hw.ipynb", cells)
    sources, _ = notebook_sources(path)
    text = sources["ex1"].text
    assert "exc_info" not in text and "FunctionType" not in text
    kept = [line for line in text.splitlines() if "sys" in line]
    assert "import sys" in kept and "from sys import stderr" in kept
