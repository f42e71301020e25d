"""The --plot pictures: written, valid PNGs; a clear error without matplotlib."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch

from grader.show import plots
from grader.training import sgd as training
from grader.truth import fixture

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == PNG


@pytest.fixture(scope="module")
def truth():
    return fixture.build(fixture.PRIMARY).truth


def test_grading_modules_import_matplotlib_only_inside_functions():
    for module in (plots, training):
        tree = ast.parse(Path(module.__file__).read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top for a in n.names] + [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not any(name.startswith("matplotlib") for name in names), module.__name__


def test_missing_matplotlib_gives_a_friendly_error(monkeypatch, tmp_path, truth):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # makes `from matplotlib.figure import` fail
    with pytest.raises(RuntimeError, match=r"pip install 'backprop-ninja-grader\[plot\]'"):
        plots.plot_dlogits(truth["dlogits"], truth["dlogits"], tmp_path / "d.png")


def test_plot_dlogits(tmp_path, truth):
    pytest.importorskip("matplotlib")
    for i, student in enumerate((truth["dlogits"] * 32, truth["dlogits"][:, :5])):
        path = tmp_path / f"dlogits{i}.png"
        assert plots.plot_dlogits(student, truth["dlogits"], path) == str(path)
        assert _is_png(path)


def test_plot_differences_of_every_shape(tmp_path, truth):
    pytest.importorskip("matplotlib")
    dC = truth["dC"].clone()  # (27, 10)
    dC[5] += 0.01
    items = [
        ("ex1.dC", dC, truth["dC"]),
        ("ex1.db1", truth["db1"] * 1.5, truth["db1"]),  # 1-D
        ("ex1.demb", truth["demb"] * 1.1, truth["demb"]),  # 3-D
        ("ex1.dbngain", truth["dbngain"].view(-1), truth["dbngain"]),  # wrong shape
        ("ex1.dlogits", truth["dlogits"].clone(), truth["dlogits"]),  # exact
        ("ex1.dloss", torch.tensor(1.0), torch.tensor(1.0)),  # 0-D
    ]
    path = tmp_path / "diffs.png"
    assert plots.plot_differences(items, path) == str(path)
    assert _is_png(path)
    with pytest.raises(ValueError):
        plots.plot_differences([], tmp_path / "none.png")


def test_plot_losses(tmp_path):
    pytest.importorskip("matplotlib")
    run = training.TrainingRun(
        steps=300,
        train_loss=2.5,
        val_loss=2.6,
        samples=[],
        seconds=0.1,
        params={},
        bn_stats={},
        losses=[3.3 - i / 300 for i in range(300)],
    )
    path = tmp_path / "loss.png"
    assert training.plot_losses(run, path) == str(path) == run.to_dict()["plot"]
    assert _is_png(path)


def test_one_dimensional_gradients_are_bars_not_strips(truth):
    pytest.importorskip("matplotlib")
    items = [
        ("ex1.db1", truth["db1"].view(1, -1), truth["db1"]),  # (1, 64) for (64,): a shape mismatch
        ("ex1.db2", truth["db2"] * 1.5, truth["db2"]),  # (27,), wrong values
        ("ex1.dC", truth["dC"] * 1.1, truth["dC"]),  # (27, 10): still a heat map
    ]
    axes = plots.differences_figure(items).axes
    bars = [a for a in axes if a.patches]
    maps = [a for a in axes if a.images]
    assert [a.get_title().split(":")[0] for a in bars] == ["ex1.db1", "ex1.db2"]
    assert [a.get_title().split(":")[0] for a in maps] == ["ex1.dC"]
    assert len(bars[0].patches) == 2 * 64  # yours beside autograd's


def test_loss_curve_shows_the_reference_beside_yours(tmp_path):
    pytest.importorskip("matplotlib")
    student = [3.3 - i / 300 for i in range(300)]
    reference = [3.3 - i / 200 for i in range(300)]
    fig = plots.loss_curves_figure(student, reference, train=2.5, val=2.6)
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.lines}
    assert set(lines) == {"autograd's loss.backward()", "your backward"}
    assert lines["autograd's loss.backward()"].get_ydata()[-1] < lines["your backward"].get_ydata()[-1]
    path = tmp_path / "curve.png"
    assert plots.plot_loss_curves(student, reference, path) == str(path) and _is_png(path)
