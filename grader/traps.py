"""The trap catalogue: each classic backprop bug as an id, a recogniser and a message.

Recognisers judge the values a submission returned (and, for mutates-input and uses-autograd, what its code did
while it ran), never its source text. Most compare against a known-wrong variant that autograd computes on the
same inputs (see fixture.Variant); the rest test the pattern of the error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from grader import compare as cmp
from grader.corpus import ITOS
from grader.fixture import Fixture, Variant


@dataclass(frozen=True)
class Trap:
    """A known bug: its id (part of the JSON contract), a message template and a longer hint."""

    id: str
    message: str
    hint: str
    fails: bool = True  # False: the item may still pass, the trap is a note

    def render(self, **details) -> str:
        """Fill the message template with what the recogniser found."""
        return self.message.format(**details)


TRAPS: dict[str, Trap] = {
    t.id: t
    for t in (
        Trap(
            "dC-repeated-rows",
            "Rows of C that this batch looks up more than once are wrong: {rows}. Rows looked up exactly once "
            "are right. Each lookup of a row sends it a gradient and all of them must be added up; an indexed "
            "in-place update (`dC[Xb] += demb`, `dC[ix] = ...` in a loop, index_put_ without accumulate) keeps "
            "only one of them. Fix: accumulate with += inside a loop over every (sample, position), or use "
            "index_add_ along dim 0, or a one-hot matrix (one row per lookup) transposed times the flattened demb.",
            "C[Xb] performs n*block_size lookups into a table of only vocab_size rows, so common characters are "
            "fetched many times per batch. Mathematically dC[c] is the sum of demb[b, k] over every (b, k) with "
            "Xb[b, k] == c. With advanced indexing, `dC[Xb] += demb` is a read, an add and a write-back: all "
            "copies of a repeated index read the same old value, and the last write-back wins. Nothing raises, "
            "the shape is right and most rows even hold the right numbers; only the repeated rows come out too "
            "small. index_add_ (and a one-hot matmul, and a Python loop with +=) accumulate every contribution.",
        ),
        Trap(
            "dcounts-one-path",
            "counts is used twice in the forward pass (probs = counts * counts_sum_inv, and "
            "counts_sum = counts.sum(1)), but your dcounts only has {present}. Add the gradient that arrives "
            "through {missing}: a variable used twice receives the sum of both contributions.",
            "Whenever a forward variable feeds two operations, the multivariate chain rule adds the gradients "
            "flowing back along each path (micrograd's `+=`). dcounts = dprobs * counts_sum_inv (from probs) "
            "plus dcounts_sum broadcast across the row (from counts_sum).",
        ),
        Trap(
            "dbndiff-one-path",
            "bndiff is used twice in the forward pass (bnraw = bndiff * bnvar_inv, and bndiff2 = bndiff**2 "
            "which leads to the variance), but your gradient only has {present}. Add the gradient that arrives "
            "through {missing}.",
            "bndiff reaches the loss along two paths: directly through bnraw, and through bndiff2 -> bnvar -> "
            "bnvar_inv -> bnraw. The second one is easy to forget because it comes back through the variance. "
            "The full gradient is the sum: bnvar_inv * dbnraw + 2 * bndiff * dbndiff2.",
        ),
        Trap(
            "dhprebn-one-path",
            "hprebn is used twice in the forward pass (bndiff = hprebn - bnmeani, and bnmeani = mean of hprebn), "
            "but your gradient only has {present}. Add the gradient that arrives through {missing}.",
            "Every element of hprebn influences the loss directly (through bndiff) and through the batch mean "
            "bnmeani, which every row subtracts. The mean's gradient is spread back evenly: each row gets "
            "1/n of dbnmeani. The full gradient is the sum of both.",
        ),
        Trap(
            "dlogits-one-path",
            "Passes, but your dlogits skips the path through logit_maxes (logits.max(1) takes one entry per "
            "row). Its contribution is almost exactly zero, because subtracting the row max only guards exp() "
            "against overflow and cannot change the probabilities, so the check passes. For a complete atomic "
            "backward, add dlogit_maxes at each row's max position (a one-hot of the argmax).",
            "logit_maxes only shifts each row of logits, and softmax is invariant to shifts, so the loss does not "
            "depend on it: dlogit_maxes is ~1e-9, float noise. The full gradient still has two paths: "
            "dnorm_logits directly, plus dlogit_maxes routed to the argmax entry of each row.",
            fails=False,
        ),
        Trap(
            "bessel",
            "Off by the constant factor n/(n-1) = {factor}: {where}. The forward pass divides by n-1 when it "
            "computes bnvar (Bessel's correction), so its backward uses 1/(n-1) as well. You used 1/n.",
            "The lecture's BatchNorm uses the unbiased variance, 1/(n-1) * sum(bndiff2), in training (and so at "
            "test time too, avoiding the train/test mismatch of the original paper). The derivative of "
            "1/(n-1) * sum(x) with respect to each x is 1/(n-1); with n=32 the difference is only 3%, which is "
            "why this bug is easy to miss by eye.",
        ),
        Trap(
            "tanh-preact",
            "The tanh derivative must be written with tanh's output: 1 - h**2, where h = tanh(hpreact). "
            "You used 1 - hpreact**2, its input.{where}",
            "d/dx tanh(x) = 1 - tanh(x)**2. The forward pass already computed tanh(hpreact) and called it h, "
            "so the local derivative is 1 - h**2 and dhpreact = (1 - h**2) * dh.",
        ),
        Trap(
            "shape-mismatch",
            "Returned shape {shape}, but {var} has shape {expected}: every gradient has exactly its variable's "
            "shape. {detail}",
            "Broadcasting in the forward pass (a (1, 64) bias added to every row) is a sum in the backward "
            "pass, and a sum in the forward pass is a broadcast in the backward pass. After summing, keep the "
            "dimension the variable has (keepdim=True) or drop the one it doesn't. A wrong shape can still "
            "produce right numbers after broadcasting, which is exactly why the grader checks shapes strictly.",
        ),
        Trap(
            "sign-flip",
            "Every entry has the wrong sign: your result is exactly -1 times the true gradient. Check the sign "
            "of the local derivative you used (d(a - b)/db = -1, d(-x)/dx = -1, d log(x)/dx = +1/x).",
            "A flipped sign usually comes from a subtraction in the forward pass (norm_logits = logits - "
            "logit_maxes, bndiff = hprebn - bnmeani) or from the minus in the loss.",
        ),
        Trap(
            "scaled",
            "Right up to a constant factor: every entry is {factor} times the true value{named}. {advice}",
            "A constant factor means the structure of your gradient is right and one scalar is off: a 1/n "
            "from a mean, an exponent brought down (x**k -> k * x**(k-1)), or a factor applied twice.",
        ),
        Trap(
            "transposed",
            "Right but transposed: your result is the transpose of the true gradient. For out = A @ B, "
            "dA = dout @ B.T and dB = A.T @ dout; let the shapes tell you which side each factor goes on.",
            "Matrix-product gradients are easiest to get from the shapes: dA must have A's shape, and only one "
            "arrangement of dout and B (transposed or not) produces it.",
        ),
        Trap(
            "hardcoded-size",
            "Right on the lecture's fixture, but {how} on a second batch with other sizes (another n, "
            "block_size, n_embd, n_hidden and seed). Some size is written into your code (32, 27, 64, 10, 3, "
            "200 or a range(32)); take sizes from the tensors instead (n, Xb.shape, emb.shape, C.shape, ...).",
            "Every item is graded on two geometries and passes only if both pass; the second one's numbers are "
            "not shown. Typical culprits: view(32, 3, 10) instead of view(emb.shape), range(32) instead of "
            "range(n), torch.zeros(32, 27) instead of torch.zeros_like(logits).",
        ),
        Trap(
            "mutates-input",
            "Your function changed its input {names} in place. In a real backward pass {first} is still read by "
            "other steps, which would then see corrupted values; the grader fails this even when your returned "
            "values are right. Work on a copy: start from {first}.clone() before +=, -=, /= or index writes.",
            "`d = dnorm_logits; d += ...` does not copy: d and dnorm_logits are the same tensor, so the += "
            "rewrites dnorm_logits too. In the lecture's backward, dlogit_maxes is computed from dnorm_logits, "
            "and modifying dnorm_logits in place afterwards leaves the rest of the pass inconsistent. .clone() "
            "(or an out-of-place expression) keeps the original intact.",
        ),
        Trap(
            "uses-autograd",
            "Your code called {calls}. The point of this exercise is to derive the gradient by hand; autograd is "
            "what the grader compares you against. Remove it and write out the chain rule for this step.",
            "The grader runs your function with gradient tracking off and watches .backward(), "
            "torch.autograd.*, requires_grad_(), enable_grad() and torch.func. Any use fails the item.",
        ),
        Trap(
            "stale-state",
            "Step 1 matched autograd, but from step {step} on {grads} drift away. Your backward keeps something "
            "between calls (an accumulator created once at module level, a default argument like `cache={{}}`, "
            "or a global), so each call builds on the last one: the forgotten zero_grad. Create every gradient "
            "from fresh tensors inside the function.",
            "The training check calls backward on several consecutive SGD steps and compares each with "
            "autograd. A stateless backward is right on every step; one that accumulates is right only the "
            "first time, then drifts further with every call.",
        ),
    )
}


@dataclass
class Finding:
    """A recognised trap and the sentence that explains it here."""

    trap: str
    message: str

    @property
    def fails(self) -> bool:
        return TRAPS[self.trap].fails


def finding(trap_id: str, **details) -> Finding:
    """Render a trap's message with details."""
    return Finding(trap_id, TRAPS[trap_id].render(**details))


# ---------------------------------------------------------------------------------------------------------------
# recognisers over values


@dataclass
class Evidence:
    """What is known about one item on the graded geometry."""

    item_id: str
    var: str  # the variable whose gradient this is
    value: torch.Tensor
    truth: torch.Tensor
    fx: Fixture
    comparison: cmp.Comparison
    extra: dict = field(default_factory=dict)


def _fmt_shape(shape) -> str:
    shape = tuple(shape)
    return f"({shape[0]},)" if len(shape) == 1 else str(shape)


def shape_mismatch(ev: Evidence) -> list[Finding]:
    """Explain a wrong shape: lost or added keepdim, a missing sum, or a rearrangement."""
    if ev.comparison.shape_ok:
        return []
    v, t = ev.value, ev.truth
    found = []
    if ev.comparison.broadcast_match:
        extra = "keep the summed dimension with keepdim=True" if v.dim() < t.dim() else "match its dimensions"
        detail = f"The values match after broadcasting; return shape {_fmt_shape(t.shape)}: {extra}."
    elif v.dim() == t.dim() + 1 and any(cmp.close(v.sum(d), t, 1e-4, 1e-6) for d in range(v.dim())):
        d = next(d for d in range(v.dim()) if cmp.close(v.sum(d), t, 1e-4, 1e-6))
        detail = (
            f"The values match after .sum({d}): {ev.var} was broadcast along dim {d} in the forward pass, so "
            f"its gradient sums over that dimension."
        )
    elif v.dim() == t.dim() and any(
        v.shape[d] != t.shape[d] and t.shape[d] == 1 and cmp.close(v.sum(d, keepdim=True), t, 1e-4, 1e-6)
        for d in range(v.dim())
    ):
        d = next(d for d in range(v.dim()) if t.shape[d] == 1 and v.shape[d] != 1)
        detail = f"The values match after .sum({d}, keepdim=True): sum over the dimension that was broadcast."
    elif v.dim() == 2 and v.T.shape == t.shape and cmp.close(v.T.contiguous(), t):
        detail = "The values are right but transposed."
        found.append(finding("transposed"))
    elif ev.comparison.reshape_match:
        detail = (
            f"The same numbers in another arrangement: reshape it to {ev.var}'s shape (e.g. .view({ev.var}.shape))."
        )
    else:
        detail = "The values do not match either, even after broadcasting."
    return [
        finding("shape-mismatch", shape=_fmt_shape(v.shape), var=ev.var, expected=_fmt_shape(t.shape), detail=detail),
        *found,
    ]


def repeated_rows(ev: Evidence) -> list[Finding]:
    """Recognise dC where rows fetched once are right and only rows fetched several times are wrong."""
    if not ev.comparison.shape_ok:
        return []
    counts = torch.bincount(ev.fx.Xb.flatten(), minlength=ev.truth.shape[0])
    wrong = cmp.wrong_rows(ev.value, ev.truth)
    if wrong.numel() == 0 or not bool((counts[wrong] > 1).all()):
        return []
    once = (counts == 1).nonzero().flatten()
    if once.numel() and cmp.wrong_rows(ev.value[once], ev.truth[once]).numel():
        return []
    rows = ", ".join(f"{int(r)} ('{ITOS[int(r)]}', looked up {int(counts[r])}x)" for r in wrong[:8])
    if wrong.numel() > 8:
        rows += f" and {wrong.numel() - 8} more"
    return [finding("dC-repeated-rows", rows=rows)]


def _cut(*edges) -> Variant:
    return Variant(cut=frozenset(edges))


# (trap, items, variant, what the student's gradient still has, what it misses)
_BN_ITEMS = {"ex3.dhprebn", "ex4.dW1", "ex4.db1", "ex4.dC"}
VARIANT_TRAPS = (
    (
        "dcounts-one-path",
        {"ex1.dcounts"},
        _cut(("counts", "counts_sum")),
        {"present": "the direct path through probs", "missing": "counts_sum"},
    ),
    (
        "dcounts-one-path",
        {"ex1.dcounts"},
        _cut(("counts", "probs")),
        {"present": "the path through counts_sum", "missing": "probs (dprobs * counts_sum_inv)"},
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bndiff2")),
        {"present": "the direct path through bnraw", "missing": "bndiff2 (2 * bndiff * dbndiff2)"},
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bnraw")),
        {"present": "the path through bndiff2", "missing": "bnraw (bnvar_inv * dbnraw)"},
    ),
    (
        "dbndiff-one-path",
        _BN_ITEMS,
        _cut(("bndiff", "bndiff2")),
        {"present": "the direct path through the normalisation", "missing": "the variance"},
    ),
    (
        "dhprebn-one-path",
        {"ex1.dhprebn"},
        _cut(("hprebn", "bnmeani")),
        {"present": "the direct path through bndiff", "missing": "the batch mean bnmeani (1/n of dbnmeani per row)"},
    ),
    (
        "dhprebn-one-path",
        {"ex1.dhprebn"},
        _cut(("hprebn", "bndiff")),
        {"present": "the path through bnmeani", "missing": "bndiff (dbndiff itself)"},
    ),
    (
        "dhprebn-one-path",
        _BN_ITEMS,
        _cut(("hprebn", "bnmeani")),
        {"present": "the direct path", "missing": "the batch mean"},
    ),
    ("bessel", {"ex1.dbndiff2"} | _BN_ITEMS, Variant(bessel=True), {}),
    ("tanh-preact", {"ex1.dhpreact", "ex4.dbngain", "ex4.dbnbias"} | _BN_ITEMS, Variant(tanh_preact=True), {}),
)


def known_variants(ev: Evidence) -> list[Finding]:
    """Recognise a known-wrong backward by comparing with autograd's gradient of that variant."""
    if not ev.comparison.shape_ok:
        return []
    grad = "d" + ev.var
    for trap_id, item_ids, variant, details in VARIANT_TRAPS:
        if ev.item_id not in item_ids:
            continue
        wrong = ev.fx.variant(variant)[grad]
        if cmp.loosely(wrong, ev.truth) or not cmp.loosely(ev.value, wrong):
            continue
        if trap_id == "bessel":
            n = ev.fx.n
            where = (
                "your dbndiff2 is (n-1)/n times the true one"
                if ev.item_id == "ex1.dbndiff2"
                else "the variance term of your BatchNorm backward is (n-1)/n times too small"
            )
            return [finding("bessel", factor=f"{n}/{n - 1} = {n / (n - 1):.4f}", where=where)]
        if trap_id == "tanh-preact":
            where = (
                ""
                if ev.item_id == "ex1.dhpreact"
                else (" Every gradient below h (dhpreact, then dbngain, dbnbias, dW1, db1, dC) inherits the error.")
            )
            return [finding("tanh-preact", where=where)]
        return [finding(trap_id, **details)]
    return []


def _name_factor(c: float, n: int) -> tuple[str, str]:
    named = {
        n: (" (= n, the batch size)", "A 1/n from the mean in the loss or the batch mean is missing or doubled."),
        1 / n: (" (= 1/n)", "A 1/n is applied where it does not belong, or twice."),
        n - 1: (" (= n-1)", "A 1/(n-1) from the variance is missing."),
        1 / (n - 1): (" (= 1/(n-1))", "A 1/(n-1) is applied twice or where it does not belong."),
        2.0: (" (= 2)", "A factor 2 is doubled, e.g. from x**2 -> 2*x applied twice."),
        0.5: (" (= 1/2)", "A factor 2 is missing, e.g. d(x**2)/dx = 2*x."),
    }
    for value, (label, advice) in named.items():
        if abs(c - value) <= 1e-3 * abs(value):
            return label, advice
    return "", "Look for a constant you added, dropped or applied twice."


def generic(ev: Evidence) -> list[Finding]:
    """Recognise a flipped sign, a constant factor or a transpose."""
    if not ev.comparison.shape_ok:
        return []
    v, t = ev.value, ev.truth
    if cmp.loosely(v, -t):
        return [finding("sign-flip")]
    if v.dim() == 2 and v.shape[0] == v.shape[1] and cmp.loosely(v.T.contiguous(), t):
        return [finding("transposed")]
    c = cmp.best_scale(v, t)
    if c is not None and abs(c - 1) > 1e-3 and abs(c) > 1e-6:
        label, advice = _name_factor(c, ev.fx.n)
        return [finding("scaled", factor=f"{c:.6g}", named=label, advice=advice)]
    return []


RECOGNISERS: tuple[Callable[[Evidence], list[Finding]], ...] = (shape_mismatch, repeated_rows, known_variants, generic)


def diagnose(ev: Evidence) -> list[Finding]:
    """Return the traps a failed item's values show, most specific first; at most one value diagnosis."""
    if ev.item_id not in ("ex1.dC", "ex4.dC"):
        recognisers = [r for r in RECOGNISERS if r is not repeated_rows]
    else:
        recognisers = list(RECOGNISERS)
    for recognise in recognisers:
        found = recognise(ev)
        if found:
            return found
    return []


def dlogits_note(value: torch.Tensor, fx: Fixture) -> list[Finding]:
    """Recognise a passing dlogits that equals dnorm_logits exactly where the logit_maxes path adds to it."""
    truth, direct = fx.truth["dlogits"], fx.truth["dnorm_logits"]
    rows = torch.arange(truth.shape[0])
    at_max = fx.tensors["logits"].max(1).indices
    carried = truth[rows, at_max] != direct[rows, at_max]  # rows where the max path is not lost to rounding
    if not bool(carried.any()) or value.shape != truth.shape:
        return []
    if bool((value[rows, at_max][carried] == direct[rows, at_max][carried]).all()):
        return [finding("dlogits-one-path")]
    return []


def locate(value: torch.Tensor, truth: torch.Tensor) -> str:
    """Describe where a same-shaped wrong gradient differs: NaNs, a few rows or columns, or everywhere."""
    bad = ~torch.isfinite(value)
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0])
        return (
            f"It contains {int(bad.sum())} NaN/inf entries (the first at {list(first)}): look for a log or a "
            f"power of 0, a division by zero, or an overflow."
        )
    if value.dim() == 0:
        return f"You returned {float(value):.6g}; the true value is {float(truth):.6g}."
    tol = 1e-8 + 1e-5 * truth.abs()
    wrong = (value - truth).abs() > tol
    total, nwrong = wrong.numel(), int(wrong.sum())
    where = ""
    if value.dim() >= 2:
        rows = wrong.reshape(wrong.shape[0], -1).any(1).nonzero().flatten()
        cols = wrong.reshape(wrong.shape[0], wrong.shape[1], -1).any(2).any(0).nonzero().flatten()
        if 0 < rows.numel() <= max(1, wrong.shape[0] // 2):
            where = "Correct except rows " + _list(rows) + "."
        elif 0 < cols.numel() <= max(1, wrong.shape[1] // 2):
            where = "Correct except columns " + _list(cols) + "."
    elif 0 < nwrong <= max(1, total // 2):
        where = "Correct except positions " + _list(wrong.nonzero().flatten()) + "."
    worst = tuple(int(i) for i in torch.nonzero((value - truth).abs() == (value - truth).abs().max())[0])
    return f"{where} {nwrong} of {total} entries differ; the largest difference is at {list(worst)}.".strip()


def _list(idx: torch.Tensor, limit: int = 10) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    return shown + (f" and {idx.numel() - limit} more" if idx.numel() > limit else "")
