"""check() for real: the student notebook, answered the lecture's way, executed in a Jupyter kernel."""

from __future__ import annotations

from textwrap import indent

import pytest

from grader.ship import student_notebook as student
from tests.conftest import ROOT
from tests.notebooks import lecture

nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

SNAPSHOT = """torch.set_num_threads(2)
_state = {k: (id(v), float(v.detach().double().sum()) if isinstance(v, torch.Tensor) else None)
          for k, v in list(globals().items()) if not k.startswith('_')}"""
COMPARE = """_now = {k: (id(v), float(v.detach().double().sum()) if isinstance(v, torch.Tensor) else None)
        for k, v in list(globals().items()) if not k.startswith('_')}
print('changed:', sorted(set(_state.items()) ^ set(_now.items())), 'threads:', torch.get_num_threads())
_x = torch.randn(3, requires_grad=True)
(_g,) = torch.autograd.grad(torch.tanh(_x).sum(), _x, create_graph=True)
print('second order:', _g.grad_fn is not None)"""
MANUAL = "        # manual backprop: assign dlogits ... dC here (no loss.backward())\n"


def _answered():
    """Return the student notebook with the lecture's answers in its exercise cells."""
    from nbformat import v4

    nb = student.notebook()
    answers = {student.EX1: lecture.EX1.format(dC=lecture.DC_LOOP), student.EX2: lecture.EX2, student.EX3: lecture.EX3}
    for cell in nb.cells:
        cell.source = answers.get(cell.source, cell.source)
        cell.source = cell.source.replace(MANUAL, indent(lecture.EX4_BACKPROP, " " * 8))
        cell.source = cell.source.replace("max_steps = 1000", "max_steps = 3")
        if cell.source == 'check("ex1")':
            cell.source = 'check("ex1", plot=True)'
    nb.cells += [v4.new_code_cell(SNAPSHOT), v4.new_code_cell("check()"), v4.new_code_cell(COMPARE)]
    return nb


@pytest.fixture(scope="module")
def executed():
    nb = _answered()
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    return {cell.source: cell.get("outputs", []) for cell in nb.cells if cell.cell_type == "code"}


def _data(outputs, kind):
    return [o["data"][kind] for o in outputs if o.get("output_type") == "display_data" and kind in o["data"]]


def test_check_shows_the_lecture_answers_graded_inline(executed):
    errors = [o for outs in executed.values() for o in outs if o.get("output_type") == "error"]
    assert not errors, [(e["ename"], e["evalue"]) for e in errors]
    (table,) = _data(executed['check("ex1", plot=True)'], "text/html")
    assert "<code>ex1.dbnmeani</code>" in table and "shape-mismatch" in table
    assert table.count(">passed<") == 25 and table.count(">FAILED<") == 1
    assert "ex1: graded In [" in table
    # a points column, as the terminal table has it: no course.toml here, so the grader's own points
    assert ">points</th>" in table and ">0/1</td>" in table and table.count(">1/1</td>") == 25
    said = [t for outs in executed.values() for kind in ("text/html", "text/plain") for t in _data(outs, kind)]
    assert said and not any(".py" in t or "ran out of order" in t for t in said)  # cells, run in order
    (picture,) = _data(executed['check("ex1", plot=True)'], "image/png")
    assert len(picture) > 1000
    for ex, points in (("ex2", "2/2"), ("ex3", "4/4"), ("ex4", "10/10")):
        (text,) = _data(executed[f'check("{ex}")'], "text/plain")
        assert f"score {points}: " in text, text


def test_check_leaves_the_kernel_as_it_was(executed):
    (text,) = _data(executed["check()"], "text/plain")
    assert "score 41/42: " in text
    (out,) = [o["text"] for o in executed[COMPARE] if o.get("output_type") == "stream"]
    assert out.strip() == "changed: [] threads: 2\nsecond order: True"  # torch's backward kernels unhooked
