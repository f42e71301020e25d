"""Answers as right as autograd's pass on every geometry: the truth's own float32 rounding is not a mistake."""

from __future__ import annotations

import contextlib

import pytest
import torch

from grader.grading import compare as cmp
from grader.grading.runner import Outcome, judge
from grader.sandbox import zygote
from grader.sandbox.wire import Returned
from grader.spec import catalogue
from grader.truth import fixture

GEOMETRIES = 60


def _exact_answers(fx: fixture.Fixture) -> dict[str, torch.Tensor]:
    """Return right answers rounded otherwise than autograd's: the float64 gradient cast down, an exact zero."""
    _, exact = fixture.autograd_truth({k: v.double() for k, v in fx.params.items()}, fx.Xb, fx.Yb)
    return {
        "dW2 in float64": ("dW2", exact["dW2"].float()),
        "dlogit_maxes = 0": ("dlogit_maxes", torch.zeros_like(fx.truth["dlogit_maxes"])),
        "db1 = 0": ("db1", torch.zeros_like(fx.truth["db1"])),
        "dlogit_maxes by matmul": (
            "dlogit_maxes",
            -(fx.truth["dnorm_logits"] @ torch.ones(fx.truth["dnorm_logits"].shape[1], 1)),
        ),
    }


@pytest.mark.parametrize("built", ["with its noise", "as a zygote's client builds it"])
def test_answers_as_right_as_autograds_pass_on_every_hidden_geometry(built):
    """The same whether the rounding allowance was computed with the truth, or only where allclose alone says no."""
    missed_by_allclose = set()
    items = {i.var: i for i in catalogue.items(("ex1",))}
    public = fixture.build(fixture.PRIMARY)
    with fixture.BUILT.emptied(), _zygote_client(built != "with its noise"):
        judged = _judge_every_geometry(items, public, missed_by_allclose, built)
    # the test means something only if plain allclose (atol 1e-8) fails some of these geometries
    assert {"dW2 in float64", "dlogit_maxes = 0"} <= missed_by_allclose
    assert judged == 4 * GEOMETRIES


@contextlib.contextmanager
def _zygote_client(on: bool):
    """Build fixtures as a process whose sandboxes a zygote forks (it forks none, so waits to need the noise)."""
    zygote.use(object() if on else None)
    try:
        yield
    finally:
        zygote.use(None)


def _judge_every_geometry(items, public, missed_by_allclose, built) -> int:
    judged = 0
    for k in range(GEOMETRIES):
        fx = fixture.build(fixture.hidden_geometry(f"noise-{k}"))
        assert bool(fx.noise) == (built == "with its noise")
        answers, public_answers = _exact_answers(fx), _exact_answers(public)
        for label, (grad, value) in answers.items():
            if not torch.allclose(value, fx.truth[grad], atol=1e-8):
                missed_by_allclose.add(label)
            item = items[grad[1:]]
            on_public = Outcome(value=Returned(public_answers[label][1], False, False))
            result = judge(item, on_public, Outcome(value=Returned(value, False, False)), public, fx)
            assert (result.status, result.traps) == ("passed", []), (label, k, result.message)
            judged += 1
        if any(not torch.allclose(v, fx.truth[g], atol=1e-8) for g, v in answers.values()):
            assert fx.noise, "the allowance was needed, so it was computed"
    return judged


def test_the_noise_term_is_far_below_any_mistake():
    fx = fixture.build(fixture.PRIMARY)
    for grad, truth in fx.truth.items():
        scale = float(truth.abs().max())
        if scale > 1e-6:  # dlogit_maxes and db1 are rounding through and through
            assert cmp.NOISE_SLACK * fx.noise[grad] < 1e-5 * scale, grad


def _ulps(x: torch.Tensor, k: int) -> torch.Tensor:
    """Return x moved k representable floats up (k < 0: down)."""
    toward = torch.full_like(x, float("inf") if k > 0 else -float("inf"))
    for _ in range(abs(k)):
        x = torch.nextafter(x, toward)
    return x


def test_compare_agrees_with_allclose_and_equal_to_the_last_bit():
    """compare() derives allclose and equal from one difference; at their boundary it must decide as they do."""
    gen = torch.Generator().manual_seed(0)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-30, 3.4e38])
    checked = flipped = 0
    for trial in range(240):
        scale = 10.0 ** torch.randint(-13, 3, (1,), generator=gen).item()  # tiny truths: atol decides
        truth = torch.randn(6, 5, generator=gen) * scale
        truth[0, 0] = 0.0
        atol, noise = [(1e-8, 0.0), (1e-7, 0.0), (1e-8, 3e-9), (0.0, 0.0)][trial % 4]
        tol = atol + cmp.NOISE_SLACK * noise
        edge = truth + (tol + (1e-5 * truth).abs()) * torch.where(torch.rand(truth.shape, generator=gen) < 0.5, -1, 1)
        for k in range(-3, 4):  # the representable values around allclose's boundary
            value = _ulps(edge, k)
            if trial % 5 == 0:
                value[1, 2] = special[trial % len(special)]
            c = cmp.compare(value, truth, atol, noise=noise)
            assert c.approx == bool(torch.allclose(value, truth, atol=tol)), (trial, k)
            assert c.exact == bool(torch.equal(value, truth)), (trial, k)
            assert cmp.close(value, truth, atol=atol, noise=noise) == c.approx, (trial, k)
            assert cmp.close(value, truth, 1e-4, 1e-6) == bool(torch.allclose(value, truth, 1e-4, 1e-6)), (trial, k)
            checked += 1
            flipped += c.approx
    assert checked == 240 * 7 and 0 < flipped < checked  # both verdicts were reached at the boundary
    same = torch.randn(4, 3, generator=gen)
    assert cmp.compare(same.clone(), same).exact and not cmp.compare(_ulps(same, 1), same).exact
    empty = cmp.compare(torch.zeros(0, 3), torch.zeros(0, 3))
    assert empty.exact and empty.approx and empty.maxdiff == 0.0
