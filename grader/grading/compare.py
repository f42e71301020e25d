"""Compare a returned gradient with the truth, the way the lecture's cmp() does, with shape checked strictly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from grader.sandbox import arena, forget


@dataclass(frozen=True)
class Comparison:
    """exact / approx / maxdiff of one tensor against the truth; shape_ok is strict equality of shapes."""

    exact: bool
    approx: bool
    maxdiff: float | None
    shape_ok: bool
    broadcast_match: bool = False  # values match once broadcast to the truth's shape
    reshape_match: bool = False  # the same numbers in another shape

    @property
    def passed(self) -> bool:
        return self.shape_ok and self.approx


def close(
    a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-5, atol: float = 1e-8, noise: float = 0.0, remember: bool = True
) -> bool:
    """Return torch.allclose for same-shaped tensors, False otherwise (never broadcasting); see NOISE_SLACK.

    remember=False: b is met once or twice (a student's own hidden truth), so its allowed error is not kept.
    """
    if a.shape != b.shape:
        return False
    tolerance = atol + NOISE_SLACK * noise
    allowed = _allowed(a, b, tolerance, rtol) if remember else None
    if allowed is None:
        return bool(torch.allclose(a, b, rtol=rtol, atol=tolerance))
    return bool(((a - b).abs() <= allowed).all())  # what allclose decides, for a finite b (see compare)


def loosely(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Return whether two tensors agree up to float rounding of differently ordered arithmetic."""
    if a.shape != b.shape:
        return False
    scale = float(b.abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(a, b, rtol=1e-3, atol=1e-5 * max(scale, 1e-6)))


# Ex4 differentiates a whole network in one go, in another order than autograd: its float noise is larger, and
# db1 is zero up to that noise (BatchNorm cancels the bias). There approx uses atol 1e-7 instead of 1e-8.
EX4_ATOL = 1e-7

# allclose's atol of 1e-8 is below the float32 rounding of some truths: dlogit_maxes and db1 are ~1e-9 of pure
# rounding, and a sum of 32 products rounds by ~1e-8. An answer as right as autograd's (a matmul for a row sum,
# float64 inside, an exact zero) can then miss allclose on some geometries. So atol also gets this many times the
# truth's own rounding (fixture.rounding_noise: its distance from the float64 gradient, ~1e-7 of its largest
# entry), far below any mistake a trap names.
NOISE_SLACK = 4.0


def compare(value: torch.Tensor, truth: torch.Tensor, atol: float = 1e-8, noise: float = 0.0) -> Comparison:
    """Compare like cmp(): bitwise, allclose (defaults unless atol is given, plus NOISE_SLACK * noise), maxdiff."""
    if value.shape == truth.shape:
        diff = (value - truth).abs()
        maxdiff = float(diff.max()) if diff.numel() else 0.0
        tolerance = atol + NOISE_SLACK * noise
        allowed = _allowed(value, truth, tolerance)
        if allowed is None:
            return Comparison(bool(torch.equal(value, truth)), close(value, truth, atol=tolerance), maxdiff, True)
        # allclose and equal, from the same difference: the truth is finite, so a NaN or inf anywhere in the value
        # makes maxdiff non-zero and fails `diff <= allowed` exactly as they do (tests/test_compare.py pins it)
        return Comparison(maxdiff == 0.0, bool((diff <= allowed).all()), maxdiff, True)
    broadcast = reshape = False
    maxdiff = None
    if broadcasts_to(tuple(value.shape), tuple(truth.shape)):
        expanded = value.expand(truth.shape)
        broadcast = bool(torch.allclose(expanded, truth))
        maxdiff = float((expanded - truth).abs().max()) if truth.numel() else 0.0
    if value.numel() == truth.numel():
        reshape = bool(torch.allclose(value.reshape(truth.shape), truth))
    return Comparison(False, False, maxdiff, False, broadcast, reshape)


_ALLOWED: dict[tuple[int, float, float], tuple[torch.Tensor, int, torch.Tensor | None]] = {}
forget.on_fork_forget(_ALLOWED.clear)  # its allowed errors live in the arena, zeros in a child
MAX_ALLOWED = 4096  # truths a process compares with (two geometries' ~60 gradients, Ex4's steps): far fewer


def forgetting_later() -> Callable[[], None]:
    """Return what forgets every allowed error remembered after this call (kept: those remembered before)."""
    kept = dict(_ALLOWED)

    def forget_later():
        _ALLOWED.clear()
        _ALLOWED.update(kept)

    return forget_later


def _allowed(value: torch.Tensor, truth: torch.Tensor, atol: float, rtol: float = 1e-5) -> torch.Tensor | None:
    """Return torch.isclose's allowed error for value against truth, atol + |rtol * truth|, as it computes it.

    None where allclose must decide itself: dtypes that differ or do not float, a non-finite truth, a truth
    without a version counter, a full cache. Computed once per truth and atol: every submission meets the same ones.
    """
    if value.dtype != truth.dtype or not value.is_floating_point():
        return None
    if truth.is_inference() or len(_ALLOWED) >= MAX_ALLOWED:
        return None
    key = (id(truth), atol, rtol)
    known = _ALLOWED.get(key)
    if known is not None and known[0] is truth and known[1] == truth._version:
        return known[2]
    # |rtol * truth| is the truth's size: kept in the arena, which every sandbox child drops before it runs code
    # (a child restarted after a crash is forked after judging began, and could name this cache)
    allowed = torch.mul(truth, rtol, out=arena.ARENA.alloc(truth.dtype, tuple(truth.shape))).abs_().add_(atol)
    if not bool(torch.isfinite(allowed).all()):  # never for a gradient: allclose and equal decide then
        allowed = None
    _ALLOWED[key] = (truth, truth._version, allowed)
    return allowed


def broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Return whether a tensor of shape broadcasts to target without changing target (torch's rules, by hand)."""
    if len(shape) > len(target):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(target), strict=False))


def wrong_rows(value: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Return the indices of first-dimension slices that are not allclose to the truth."""
    v, t = value.reshape(value.shape[0], -1), truth.reshape(truth.shape[0], -1)
    tol = 1e-8 + 1e-5 * t.abs()
    ok = ((v - t).abs() <= tol).all(1)
    return (~ok).nonzero().flatten()


def best_scale(value: torch.Tensor, truth: torch.Tensor) -> float | None:
    """Return c such that value is c * truth, or None when no single factor fits."""
    if value.shape != truth.shape or not torch.isfinite(value).all():
        return None
    denom = float((truth * truth).sum())
    if denom == 0.0:
        return None
    c = float((value * truth).sum()) / denom
    return c if loosely(value, c * truth) else None
