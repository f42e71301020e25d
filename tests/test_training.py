"""Ex4 training driven by a hand-written backward: the loop, bind(), gradient checks, evaluation, sampling."""

from __future__ import annotations

import inspect
import json
import math
import time

import pytest
import torch
import torch.nn.functional as F

from grader.training import sgd as training
from grader.truth import corpus as corpus_mod
from grader.truth import fixture
from tests.conftest import NAMES_TXT, REFERENCE, with_snippet


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    """Return the lecture's Ex4 gradients (written here, independent of reference/)."""
    dlogits = F.softmax(logits, 1)  # (32, 27)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T  # (32, 200)
    dhpreact = (1.0 - h**2) * dh  # (32, 200)
    s1 = dhpreact.sum(0)  # (200,)
    s2 = (dhpreact * bnraw).sum(0)  # (200,)
    dhprebn = bngain * bnvar_inv / n * (n * dhpreact - s1 - n / (n - 1) * bnraw * s2)  # (32, 200)
    dC = torch.zeros_like(C)  # (27, 10)
    dC.index_add_(0, Xb.view(-1), (dhprebn @ W1.T).view(-1, C.shape[1]))
    return {
        "dC": dC,
        "dW1": embcat.T @ dhprebn,  # (30, 200)
        "db1": dhprebn.sum(0),  # (200,)
        "dW2": h.T @ dlogits,  # (200, 27)
        "db2": dlogits.sum(0),  # (27,)
        "dbngain": s2.view(1, -1),  # (1, 200)
        "dbnbias": s1.view(1, -1),  # (1, 200)
    }


@pytest.fixture(scope="module")
def run():
    seen = []
    r = training.train(backward, None, steps=300, progress=lambda s, loss: seen.append((s, loss)), progress_every=100)
    r.seen = seen
    return r


def test_backward_in_this_file_matches_autograd():
    fx = fixture.build(fixture.EX4_PRIMARY, ex4=True)
    grads = backward(**training.bind(backward, fx.inputs()))
    for k in fixture.EX4_GRADS:
        torch.testing.assert_close(grads[k], fx.truth[k], rtol=1e-4, atol=1e-6)


def test_short_run_loss_goes_down(run):
    first, last = sum(run.losses[:20]) / 20, sum(run.losses[-50:]) / 50
    assert run.steps == len(run.losses) == 300 and run.diverged_at is None
    assert last < first - 0.3
    assert run.train_loss < 2.9 and run.val_loss < 2.9
    assert [s for s, _ in run.seen] == [0, 100, 200]
    assert run.seen[1][1] == run.losses[100]


def test_run_summary_is_json_and_leaves_losses_out(run):
    d = run.to_dict()
    json.dumps(d, allow_nan=False)
    assert {"steps", "train_loss", "val_loss", "samples", "plot"} <= set(d) and "losses" not in d
    assert len(d["samples"]) == 20 and all(set(w) <= set(corpus_mod.VOCAB[1:]) for w in d["samples"])


def test_threads_are_restored(run):
    before = torch.get_num_threads()
    training.train(backward, None, steps=2, threads=1)
    assert torch.get_num_threads() == before


def test_learning_rate_drops_at_half_the_steps():
    def ones(W1, b2):
        return {f"d{k}": torch.ones_like(v) for k, v in fixture.init_params(fixture.EX4_PRIMARY).items()}

    r = training.train(ones, None, steps=10)
    b2 = fixture.init_params(fixture.EX4_PRIMARY)["b2"]
    torch.testing.assert_close(r.params["b2"], b2 - (5 * 0.1 + 5 * 0.01))


def test_divergence_stops_the_run():
    def nan(C, W1, b1, W2, b2, bngain, bnbias):
        ps = {"C": C, "W1": W1, "b1": b1, "W2": W2, "b2": b2, "bngain": bngain, "bnbias": bnbias}
        return {f"d{k}": torch.full_like(v, math.nan) for k, v in ps.items()}

    r = training.train(nan, None, steps=50)
    assert r.diverged_at == 1 and r.steps == 2 and r.samples == []
    d = r.to_dict()
    assert d["train_loss"] is None and d["diverged_at"] == 1
    json.dumps(d, allow_nan=False)


def test_bind_names_the_unknown_parameter():
    def f(W1, logits, dlogits_please, scale=2.0):
        return None

    with pytest.raises(TypeError, match="dlogits_please") as exc:
        training.bind(f, {"W1": 1, "logits": 2})
    assert "W1, logits" in str(exc.value)
    assert training.bind(lambda W1, scale=2.0: None, {"W1": 1, "n": 3}) == {"W1": 1}


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            lambda g: g.update(db1=g["db1"].view(1, -1)),
            r"db1 with shape \(1, 200\) at step 0; expected \(200,\)",
        ),
        (lambda g: g.update(dW2=g["dW2"].double()), "dW2 with dtype float64 at step 0"),
        (lambda g: g.pop("dbnbias"), "lacks dbnbias at step 0"),
        (lambda g: g.update(dC=[0.0]), "dC as list, not a tensor"),
    ],
)
def test_bad_gradients_raise_with_the_key(change, pattern):
    def bad(**kw):
        grads = backward(**kw)
        change(grads)
        return grads

    names = "Xb Yb n C W1 W2 bngain emb embcat bnraw bnvar_inv h logits".split()
    bad.__signature__ = inspect.Signature([inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY) for k in names])
    with pytest.raises(ValueError, match=pattern):
        training.train(bad, None, steps=3)


def test_non_dict_return_raises():
    with pytest.raises(ValueError, match="must return a dict"):
        training.train(lambda W1: (W1,), None, steps=1)


def test_evaluate_and_sample_at_initialisation():
    params = fixture.init_params(fixture.EX4_PRIMARY)
    stats = training.calibrate(params, None)
    assert stats["bnmean"].shape == stats["bnvar"].shape == (1, 200)
    losses = [training.evaluate(params, stats, None, split) for split in training.SPLITS]
    assert all(3.0 < x < 4.0 for x in losses)  # about -log(1/27) = 3.3 before training
    a = training.sample(params, stats, n=5)
    assert len(a) == 5 and a == training.sample(params, stats, n=5)
    assert a != training.sample(params, stats, n=5, seed=1)
    with pytest.raises(ValueError, match="split"):
        training.evaluate(params, stats, None, "dev")


def test_reference_curve_is_autograd_on_the_same_batches(run):
    from grader.cli import training as training_cli

    reference = training_cli.reference_losses(corpus_mod.load(None), 40)
    assert len(reference) == 40 and reference[0] == run.losses[0]  # the same first batch and parameters
    # both use lr 0.1 before step 20, where the 40-step run drops it
    assert max(abs(a - b) for a, b in zip(reference[:20], run.losses[:20], strict=True)) < 1e-3


# ---------------------------------------------------------------------------------------------------------------
# The run in slices, the corpus it names, the reference curve beside it, the deadline scaled from its pace


def test_a_run_in_slices_is_the_run_in_one_go():
    whole = training.sgd(backward, None, 120)
    loop = training.Loop(backward, None, 120).run(50)
    assert len(loop.losses) == 50 and not loop.done
    params, losses, diverged_at, _ = loop.run().result()
    assert loop.done and diverged_at is None and losses == whole[1]
    assert all(torch.equal(params[k], whole[0][k]) for k in params)


def test_the_corpus_is_named_with_what_a_right_backward_reaches_there(tmp_path):
    census = corpus_mod.load(None)
    assert census.is_default and not census.is_lecture
    note = training.corpus_note(census, training.LECTURE_STEPS)
    assert "5,163 US census first names from the `names` package" in note
    assert "train 1.69 / val 2.00" in note and "train 2.07 / val 2.11" in note and "--data names.txt" in note
    assert "expect higher" not in note and "expect higher" in training.corpus_note(census, 2000)
    other = tmp_path / "other.txt"
    other.write_text("\n".join(sorted(census.words)[:500]))
    mine = corpus_mod.load(str(other))
    assert not mine.is_default and not mine.is_lecture and training.expected_losses(mine) is None
    assert f"--data {other} (500 names)" in training.corpus_note(mine, 100)
    d = training.train(backward, None, steps=2).to_dict()
    assert d["corpus"] == census.describe() and d["expected"] == {"train": 1.69, "val": 2.0, "steps": 200_000}


@pytest.mark.skipif(not NAMES_TXT.exists(), reason="the lecture's names.txt is not on this machine")
def test_the_lectures_names_txt_is_recognised():
    lecture = corpus_mod.load(str(NAMES_TXT))
    assert lecture.is_lecture and training.expected_losses(lecture) == training.LECTURE_LOSSES
    assert "the lecture's names.txt (32,033 names" in training.corpus_note(lecture, 200_000)


def test_the_reference_curve_runs_beside_and_is_cached(tmp_path, monkeypatch):
    from grader.cli import training as training_cli
    from grader.sandbox import backend

    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))
    census = corpus_mod.load(None)
    first = training_cli.ReferenceCurve(census, 30)
    assert first.cached is None and (first.job is not None) == (backend() == "fork")  # a helper, computing now
    losses = first.result()
    assert losses == pytest.approx(training.autograd_losses(census, 30), abs=1e-6)
    again = training_cli.ReferenceCurve(census, 30)
    assert again.job is None and again.result() == pytest.approx(losses, abs=1e-6)  # float32 on disk
    other = training_cli.ReferenceCurve(census, 31)
    assert other.cached is None  # another step count: another curve
    other.stop()
    monkeypatch.setenv("GRADER_CACHE", "")
    assert training_cli.cache_path(census, 30) is None


SLOW = """

import functools
import time

_fast = backward


@functools.wraps(_fast)
def backward(**inputs):
    time.sleep({sleep})
    return _fast(**inputs)
"""

STALLS = """

import functools
import time

_fast = backward
_calls = [0]


@functools.wraps(_fast)
def backward(**inputs):
    _calls[0] += 1
    if _calls[0] == 80:
        time.sleep(60)
    return _fast(**inputs)
"""


def test_a_slower_right_backward_is_given_the_time_it_needs(tmp_path, monkeypatch):
    from grader.cli import training as training_cli

    monkeypatch.setattr(training_cli, "MARGIN", 1.0)  # so the test can be short: the pace alone decides
    sub = with_snippet(tmp_path / "sub", "ex4", SLOW.format(sleep=0.015))
    steps = 200
    out = training_cli.run_full(sub, data=None, steps=steps, quiet=True, plot=None)
    assert out["steps"] == steps and out["diverged_at"] is None and out["val_loss"] < 3.0
    assert out["seconds"] > steps * 0.015
    assert out["seconds"] > training_cli.MARGIN + steps / 300  # what the old fixed budget (steps/300 s) allowed


def test_a_backward_that_stalls_after_the_opening_is_still_stopped(tmp_path, monkeypatch):
    from grader.cli import training as training_cli

    monkeypatch.setattr(training_cli, "MARGIN", 1.0)
    sub = with_snippet(tmp_path / "sub", "ex4", STALLS)
    started = time.monotonic()
    with pytest.raises(training_cli.TrainingFailed, match="got much slower, or stopped") as failed:
        training_cli.run_full(sub, data=None, steps=200, quiet=True, plot=None)
    assert time.monotonic() - started < 30
    assert "ran its first 50 steps at" in str(failed.value.message)


def test_a_backward_that_hangs_in_the_opening_is_stopped_at_its_own_deadline(tmp_path, monkeypatch):
    from grader.cli import training as training_cli

    monkeypatch.setattr(training_cli, "PROBE_TIMEOUT", 2.0)
    sub = with_snippet(tmp_path / "sub", "ex4", STALLS.replace("== 80", "== 3"))
    with pytest.raises(training_cli.TrainingFailed, match="did not run its first 50 steps within 2 s"):
        training_cli.run_full(sub, data=None, steps=200, quiet=True, plot=None)


def test_curve_trains_the_students_backward_once_with_the_reference_beside(tmp_path, monkeypatch):
    from grader.cli import training as training_cli

    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))
    trainings, helpers = [], []
    real_train, real_curve = training_cli.train_student, training_cli.ReferenceCurve.__init__

    def counted_train(*args, **kwargs):
        trainings.append([c.job is not None and not c.job.done for c in helpers])  # the helper already running
        return real_train(*args, **kwargs)

    def recorded_curve(self, *args):
        real_curve(self, *args)
        helpers.append(self)

    monkeypatch.setattr(training_cli, "train_student", counted_train)
    monkeypatch.setattr(training_cli.ReferenceCurve, "__init__", recorded_curve)
    pytest.importorskip("matplotlib")
    png = tmp_path / "curve.png"
    out = training_cli.run_full(REFERENCE, data=None, steps=120, quiet=True, plot=str(png))
    assert len(trainings) == 1 and len(helpers) == 1 and out["plot"] == str(png)
    from grader.sandbox import backend

    assert trainings[0] == [backend() == "fork"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bind_gives_star_parameters_nothing_beside_named_ones_and_refuses_them_alone():
    """`def backward(h, dlogits, **unused)` gets what it names; `(*args, **kw)` alone (no wraps) names nothing."""

    def named(h, dlogits, *rest, **unused):
        return h

    def hidden(*args, **kw):
        return args

    assert training.bind(named, {"h": 1, "dlogits": 2, "W2": 3}) == {"h": 1, "dlogits": 2}
    with pytest.raises(TypeError, match=r"hidden\(\): \*args cannot be bound"):
        training.bind(hidden, {"h": 1})
