"""Ex4 training driven by a hand-written backward: the loop, bind(), gradient checks, evaluation, sampling."""

from __future__ import annotations

import inspect
import json
import math

import pytest
import torch
import torch.nn.functional as F

from grader.training import sgd as training
from grader.truth import corpus as corpus_mod
from grader.truth import fixture


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


def test_bind_rejects_star_kwargs():
    with pytest.raises(TypeError, match=r"\*\*kw"):
        training.bind(lambda W1, **kw: None, {"W1": 1})


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

    fx = fixture.build(fixture.EX4_PRIMARY, ex4=True)
    grads = training_cli.autograd_backward(**training.bind(training_cli.autograd_backward, fx.inputs()))
    for k in fixture.EX4_GRADS:
        torch.testing.assert_close(grads[k], fx.truth[k], rtol=1e-4, atol=1e-6)
    reference = training_cli.reference_losses(corpus_mod.load(None), 40)
    assert len(reference) == 40 and reference[0] == run.losses[0]  # the same first batch and parameters
    # both use lr 0.1 before step 20, where the 40-step run drops it
    assert max(abs(a - b) for a, b in zip(reference[:20], run.losses[:20], strict=True)) < 1e-3
