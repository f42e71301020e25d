"""The trap catalogue: each classic backprop bug as an id, a recogniser and a message.

Recognisers judge the values a submission returned (and, for mutates-input and uses-autograd, what its code did
while it ran), never its source text. Most compare against a known-wrong variant that autograd computes on the
same inputs (see fixture.Variant); the rest test the pattern of the error. The messages are data, one file per
level (grading/texts/): this module names each text by its key and fills in what a recogniser found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from grader.grading import compare as cmp
from grader.grading import texts
from grader.spec.policy import LEVELS, levels_down
from grader.truth.corpus import ITOS
from grader.truth.fixture import EX1_ORDER, Fixture, Variant

DEFAULT_LEVEL = "diagnose"


def check_level(level: str) -> str:
    """Return level, or raise ValueError naming the allowed ones."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


def pick(text, level: str) -> str:
    """Return a text at a level: a string, a texts.Text, or a {level: text} dict falling back to lower levels."""
    if isinstance(text, texts.Text):
        return text.at(level)
    if not isinstance(text, dict):
        return "" if text is None else str(text)
    for lv in levels_down(level):
        if lv in text:
            return text[lv]
    return ""


@dataclass(frozen=True)
class Trap:
    """A known bug: its id (part of the JSON contract) and what a student may be told about it, by level.

    diagnose: what is wrong and where, never a fix, a formula or an answer line (the default for students).
    hint: also how to fix it, naming the code. full: the hint followed by the explanation.
    explain: the longer explanation, which may hold the answer line; concept: the same without any formula.
    --hints adds concept at diagnose and explain at hint (at full it is already part of the message).
    The texts are read from the level files (grading/texts/): `<id>.message` at diagnose and hint, `<id>.concept`,
    `<id>.explain`; a level a course's bundle leaves out says the level below's, and an absent explain is ''.
    """

    id: str
    fails: bool = True  # False: the item may still pass, the trap is a note

    @property
    def diagnose(self) -> str:
        return texts.text(f"{self.id}.message", "diagnose")

    @property
    def hint(self) -> str:
        return texts.text(f"{self.id}.message", "hint")

    @property
    def explain(self) -> str:
        return texts.text(f"{self.id}.explain", "full")

    @property
    def concept(self) -> str:
        return texts.text(f"{self.id}.concept", "diagnose")

    def render(self, level: str = DEFAULT_LEVEL, **details) -> str:
        """Fill the message template of a level with what the recogniser found."""
        filled = {k: pick(v, level) for k, v in details.items()}
        text = (self.diagnose if level == "diagnose" else self.hint).format(**filled)
        if level == "full":
            text = f"{text} {self.explain}"
        return " ".join(text.split())  # an empty detail leaves no double space

    def why(self, level: str = DEFAULT_LEVEL) -> str:
        """Return the longer explanation --hints adds at a level ('' at full, where the message has it)."""
        return {"diagnose": self.concept, "hint": self.explain}.get(level, "")


TRAPS: dict[str, Trap] = {
    t.id: t
    for t in (
        Trap("dC-repeated-rows"),
        Trap("dcounts-one-path"),
        Trap("dbndiff-one-path"),
        Trap("dhprebn-one-path"),
        Trap("dlogits-one-path", fails=False),
        Trap("dlogits-max-broadcast", fails=False),
        Trap("bessel"),
        Trap("bessel-inverted"),
        Trap("mean-divisor"),
        Trap("reduced-wrong-dim"),
        Trap("label-entries"),
        Trap("missing-eps"),
        Trap("missing-factor"),
        Trap("tanh-preact"),
        Trap("shape-mismatch"),
        Trap("sign-flip"),
        Trap("scaled"),
        Trap("transposed"),
        Trap("hardcoded-size"),
        Trap("mutates-input"),
        Trap("uses-autograd"),
        Trap("stale-state"),
    )
}


@dataclass
class Finding:
    """A recognised trap and what the recogniser found here; its message is rendered at a level."""

    trap: str
    details: dict = field(default_factory=dict)

    @property
    def fails(self) -> bool:
        return TRAPS[self.trap].fails

    @property
    def message(self) -> str:
        """Return the message at the default level."""
        return self.text(DEFAULT_LEVEL)

    def text(self, level: str = DEFAULT_LEVEL) -> str:
        """Return the sentence that explains this trap here, at a message level."""
        return TRAPS[self.trap].render(level, **self.details)


def finding(trap_id: str, **details) -> Finding:
    """Record a trap with the details its message needs (a detail may be a texts.Text or a {level: text} dict)."""
    for level in ("diagnose", "hint"):  # a missing detail fails here, where it is known
        TRAPS[trap_id].render(level, **details)
    return Finding(trap_id, details)


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


def _unit_dims(shape) -> list[int]:
    return [d for d, k in enumerate(shape) if k == 1]


def _squeezed(shape) -> tuple:
    return tuple(k for k in shape if k != 1)


def _size_one_detail(ev: Evidence) -> texts.Text | None:
    """Explain a result whose values are right and whose shape differs only by dimensions of size 1."""
    v, t = ev.value, ev.truth
    if _squeezed(v.shape) != _squeezed(t.shape) or not cmp.close(v.reshape(t.shape), t):
        return None
    if v.dim() < t.dim():  # a summed dimension was dropped: keepdim is missing
        return texts.detail("shape-mismatch", "keepdim-missing", d=_unit_dims(t.shape)[0])
    if v.dim() > t.dim():  # a size-1 dimension the variable does not have: keepdim is one too many
        return texts.detail("shape-mismatch", "keepdim-extra", d=_unit_dims(v.shape)[0], var=ev.var)
    return texts.detail("shape-mismatch", "size-one-moved", var=ev.var)


def _summed_detail(ev: Evidence) -> texts.Text | None:
    """Explain a result that needs one more sum over a dimension the forward pass broadcast."""
    v, t = ev.value, ev.truth
    for d in range(v.dim()):
        keep = v.dim() == t.dim()
        if keep and not (t.shape[d] == 1 and v.shape[d] != 1):
            continue
        if v.dim() not in (t.dim(), t.dim() + 1) or not cmp.close(v.sum(d, keepdim=keep), t, 1e-4, 1e-6):
            continue
        code = f".sum({d}, keepdim=True)" if keep else f".sum({d})"
        return texts.detail("shape-mismatch", "sum-missing", d=d, var=ev.var, code=code)
    return None


# variable -> (its full-shaped gradient, as if it were not broadcast, from the fixture; the dimension it was
# broadcast along, which its gradient sums over)
_BROADCAST = {
    "b1": (lambda fx: fx.truth["dhprebn"], 0),
    "b2": (lambda fx: fx.truth["dlogits"], 0),
    "bnbias": (lambda fx: fx.truth["dhpreact"], 0),
    "bngain": (lambda fx: fx.tensors["bnraw"] * fx.truth["dhpreact"], 0),
    "bnmeani": (lambda fx: -fx.truth["dbndiff"], 0),
    "bnvar_inv": (lambda fx: fx.tensors["bndiff"] * fx.truth["dbnraw"], 0),
    "counts_sum_inv": (lambda fx: fx.tensors["counts"] * fx.truth["dprobs"], 1),
    "logit_maxes": (lambda fx: -fx.truth["dnorm_logits"], 1),
}
_ALONG = {0: "one value per column, shared by every row", 1: "one value per row, shared by every column"}


def _wrong_dim_detail(ev: Evidence) -> texts.Text | None:
    """Explain a wrong shape that is a sum or a mean of the right terms over the wrong dimension (or a mean)."""
    if ev.var not in _BROADCAST:
        return None
    full, d = _BROADCAST[ev.var]
    try:
        x = full(ev.fx)
    except KeyError:  # a fixture without that tensor (Ex4 has no bndiff)
        return None
    v, t = ev.value, ev.truth
    right = f".sum({d}, keepdim=True)" if t.dim() == x.dim() else f".sum({d})"
    for op in ("sum", "mean"):
        for e in range(x.dim()):
            if op == "sum" and e == d:
                continue  # the right sum, kept or not: _size_one_detail says it
            for keep in (True, False):
                guess = getattr(x, op)(e, keepdim=keep)
                if guess.shape != v.shape or not cmp.loosely(v, guess):
                    continue
                code = f".{op}({e}, keepdim=True)" if keep else f".{op}({e})"
                said = "mean-not-sum" if e == d else "wrong-dim"  # the sum or mean of the right terms, or a mean
                noun = "a sum" if op == "sum" else "a mean"
                fill = {"noun": noun, "e": e, "d": d, "var": ev.var, "along": _ALONG[d], "code": code, "right": right}
                return texts.detail("shape-mismatch", said, **fill)
    return None


def shape_mismatch(ev: Evidence) -> list[Finding]:
    """Explain a wrong shape: which way a keepdim is off, a missing sum, a transpose or a rearrangement."""
    if ev.comparison.shape_ok:
        return []
    v, t = ev.value, ev.truth
    found = []
    detail = _size_one_detail(ev) or _summed_detail(ev)
    if detail is not None:
        pass
    elif ev.comparison.broadcast_match:
        detail = texts.detail("shape-mismatch", "broadcast", shape=_fmt_shape(t.shape), var=ev.var)
    elif v.dim() == 2 and v.T.shape == t.shape and cmp.close(v.T.contiguous(), t):
        detail = ""  # the transposed finding says it
        found.append(finding("transposed"))
    elif ev.comparison.reshape_match:
        detail = texts.detail("shape-mismatch", "rearranged", var=ev.var)
    else:
        detail = _wrong_dim_detail(ev) or "The values do not match either, even after broadcasting."
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
        {
            "present": "the path through counts_sum",
            "missing": texts.detail("dcounts-one-path", "probs"),
        },
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bndiff2")),
        {
            "present": "the direct path through bnraw",
            "missing": texts.detail("dbndiff-one-path", "bndiff2"),
        },
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bnraw")),
        {
            "present": "the path through bndiff2",
            "missing": texts.detail("dbndiff-one-path", "bnraw"),
        },
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
        {
            "present": "the direct path through bndiff",
            "missing": texts.detail("dhprebn-one-path", "bnmeani"),
        },
    ),
    (
        "dhprebn-one-path",
        {"ex1.dhprebn"},
        _cut(("hprebn", "bndiff")),
        {"present": "the path through bnmeani", "missing": texts.detail("dhprebn-one-path", "bndiff")},
    ),
    (
        "dhprebn-one-path",
        _BN_ITEMS,
        _cut(("hprebn", "bnmeani")),
        {"present": "the direct path", "missing": "the batch mean"},
    ),
    ("bessel", {"ex1.dbndiff2"} | _BN_ITEMS, Variant(bessel=True), {}),
    ("bessel-inverted", _BN_ITEMS, Variant(bessel_inverted=True), {}),
    ("mean-divisor", {"ex1.dhprebn"} | _BN_ITEMS, Variant(mean_n1=True), {}),
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
        n = ev.fx.n
        backward = "your BatchNorm backward" if ev.item_id.startswith("ex4.") else f"your d{ev.var}"
        if trap_id == "bessel":
            where = texts.detail("bessel", "dbndiff2" if ev.item_id == "ex1.dbndiff2" else "batchnorm")
            return [
                finding("bessel", factor=f"{n}/{n - 1} = {n / (n - 1):.4f}", ratio=f"{n / (n - 1):.4f}", where=where)
            ]
        if trap_id == "bessel-inverted":
            return [
                finding(
                    "bessel-inverted",
                    where=f"The variance's term of {backward}",
                    ratio=f"{(n / (n - 1)) ** 2:.4f}",
                    factor=f"{n}/{n - 1} = {n / (n - 1):.4f}",
                )
            ]
        if trap_id == "mean-divisor":
            return [finding("mean-divisor", where=backward, ratio=f"{n / (n - 1):.4f}", factor=f"{n / (n - 1):.4f}")]
        if trap_id == "tanh-preact":
            # Ex4: which other gradients fail with it is known once every item is judged (see link)
            where = "" if ev.item_id == "ex1.dhpreact" else f" It reaches d{ev.var} through dhpreact."
            return [finding("tanh-preact", where=where)]
        return [finding(trap_id, **details)]
    return []


_EPS_ITEMS = {"ex1.dbnvar"} | _BN_ITEMS


def missing_eps(ev: Evidence) -> list[Finding]:
    """Recognise a BatchNorm backward whose inverse square root was differentiated without eps.

    The eps changes only a few entries by little, so the test is relative: the result must be far closer to the
    eps-free variant than to the truth, or as close to it as float32 rounding lets a right answer be to the truth
    (the student's own ops round otherwise than autograd's variant: on some CPUs by more than a tenth of the gap),
    where the variant stands at least four roundings from the truth, so that no right answer can pass for it.
    """
    if not ev.comparison.shape_ok or ev.item_id not in _EPS_ITEMS:
        return []
    wrong = ev.fx.variant(Variant(no_eps=True))["d" + ev.var]
    to_truth = float((ev.value - ev.truth).abs().max())
    to_wrong = float((ev.value - wrong).abs().max())
    gap = float((wrong - ev.truth).abs().max())
    if not (gap > 0 and to_truth >= 0.5 * gap):
        return []
    if to_wrong > 0.1 * to_truth:
        noise = ev.fx.rounding("d" + ev.var)
        if not (gap >= 4 * noise and to_wrong <= noise):
            return []
    cols = _wrong_columns(wrong, ev.truth)
    where = "your dbnvar" if ev.item_id == "ex1.dbnvar" else "your BatchNorm backward"
    return [finding("missing-eps", where=where, cols=_list(cols, 8))]


def _wrong_columns(value: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Return the indices of the last dimension where some entry is not allclose to the truth."""
    v, t = value.reshape(-1, value.shape[-1]), truth.reshape(-1, truth.shape[-1])
    return (~torch.isclose(v, t)).any(0).nonzero().flatten()


def _factors(inputs: dict, upstream: dict):
    """Yield (name, tensor) for every input, the local derivatives students most often drop, then the upstream
    gradients (the chain rule's other factor: `dhpreact = 1 - h**2` without `* dh`)."""
    yield from inputs.items()
    if isinstance(inputs.get("h"), torch.Tensor):
        yield "tanh's local derivative", 1.0 - inputs["h"] ** 2  # (32, 64)
    yield from upstream.items()


def _upstream(ev: Evidence) -> dict:
    """Return the true gradients of the variables before this one in backprop order (what its step multiplies)."""
    order = EX1_ORDER
    earlier = order[: order.index(ev.var)] if ev.var in order else ()
    return {f"the upstream gradient d{v}": ev.fx.truth[f"d{v}"] for v in earlier if f"d{v}" in ev.fx.truth}


def missing_factor(ev: Evidence) -> list[Finding]:
    """Recognise a result off by exactly one known tensor (a parameter or a forward tensor), dropped or doubled."""
    if not ev.comparison.shape_ok or not torch.isfinite(ev.value).all():
        return []
    v, t = ev.value, ev.truth
    for name, f in _factors(ev.fx.inputs(), _upstream(ev)):
        if not isinstance(f, torch.Tensor) or not f.is_floating_point() or f.dim() == 0:
            continue
        if not cmp.broadcasts_to(tuple(f.shape), tuple(t.shape)):
            continue
        if cmp.loosely(t * f, t) or float(f.abs().max()) == 0.0 or float((f - f.flatten()[0]).abs().max()) == 0.0:
            continue  # a factor of ones, of zeros or a constant: not a tensor's signature
        shape = _fmt_shape(f.shape)
        if cmp.loosely(v * f, t):
            return [
                finding(
                    "missing-factor",
                    relation="divided by",
                    factor=name,
                    shape=shape,
                    advice=texts.detail(
                        "missing-factor", "upstream" if name.startswith("the upstream") else "local", name=name
                    ),
                )
            ]
        if cmp.loosely(v, t * f):
            return [
                finding(
                    "missing-factor",
                    relation="times",
                    factor=name,
                    shape=shape,
                    advice=f"Either {name} is applied once too often, or a division by it is missing.",
                )
            ]
    return []


# (value as a function of n, how the factor is named, the advice's key in detail.scaled)
_NAMED_FACTORS = (
    (lambda n: n, ", which is n, the batch size", "n"),
    (lambda n: 1 / n, ", which is one over n", "one-over-n"),
    (lambda n: n - 1, ", which is n-1", "n-1"),
    (lambda n: 1 / (n - 1), ", which is one over n-1", "one-over-n-1"),
    (lambda n: n / (n - 1), ", which is n over n-1", "n-over-n-1"),
    (lambda n: (n - 1) / n, ", which is n-1 over n", "n-1-over-n"),
    (lambda n: 2.0, "", "two"),
    (lambda n: 0.5, ", which is one half", "half"),
)


def _name_factor(c: float, n: int) -> tuple[str, texts.Text]:
    for value, label, advice in _NAMED_FACTORS:
        v = value(n)
        if abs(c - v) <= 1e-3 * abs(v):
            return label, texts.detail("scaled", advice)
    return "", texts.detail("scaled", "other")


def _fits(value: torch.Tensor, guess: torch.Tensor) -> bool:
    return bool(torch.isfinite(guess).all()) and cmp.loosely(value, guess)


def _per_row_fit(r: torch.Tensor, basis: list[torch.Tensor]) -> list[torch.Tensor]:
    """Return, row by row, the least-squares combination of the basis rows closest to r: one part per basis."""
    a = torch.stack([b.expand_as(r) for b in basis], -1).double()  # (n, H, k)
    coef = torch.linalg.lstsq(a, r.double().unsqueeze(-1)).solution  # (n, k, 1)
    return [(a[..., k] * coef[:, k]).to(r.dtype) for k in range(len(basis))]


def reduced_wrong_dim(ev: Evidence) -> list[Finding]:
    """Recognise Ex3's closed form with the batch mean's or the variance's reduction over dim 1 instead of dim 0.

    The true dhprebn is D + M + V: the direct term, the batch mean's term (one number per column, times a per-column
    factor) and the variance's term (bnraw times one number per column, times that factor). A reduction over dim 1
    makes a term one number per row instead; written with the factor outside the sum (bngain * bnvar_inv) or inside
    (bnvar_inv, the gain folded into the gradient), so both are tried. A per-row fit must then match exactly, and
    every term it finds must be there (a term left out is a dropped path, not a wrong dimension).
    """
    if ev.item_id != "ex3.dhprebn" or not ev.comparison.shape_ok or not torch.isfinite(ev.value).all():
        return []
    fx, v = ev.fx, ev.value
    n, dh, bnraw = fx.n, fx.truth["dhpreact"], fx.tensors["bnraw"]
    gain, inv = fx.params["bngain"], fx.tensors["bnvar_inv"]
    g = gain * dh  # (32, 64)
    direct = inv * g
    mean = -inv * g.mean(0, keepdim=True)
    var = -inv * bnraw * (g * bnraw).sum(0, keepdim=True) / (n - 1)
    ones = torch.ones_like(bnraw)
    tiny = 1e-3 * float(ev.truth.abs().max())
    trials = (
        ("mean", direct + var, [ones]),  # the mean's term over dim 1, the variance's right
        ("var", direct + mean, [bnraw]),  # the variance's term over dim 1, the mean's right
        ("both", direct, [ones, bnraw]),
    )
    for factor in (gain * inv, inv):
        for found, rest, basis in trials:
            parts = [factor * part for part in _per_row_fit((v - rest) / factor, basis)]
            if all(float(part.abs().max()) > tiny for part in parts) and _fits(v, rest + sum(parts)):
                terms = {
                    "mean": "The batch mean's term",
                    "var": "The variance's term",
                    "both": "Both the batch mean's and the variance's terms",
                }[found]
                verb = "are reduced" if found == "both" else "is reduced"
                return [finding("reduced-wrong-dim", terms=terms, verb=verb)]
    return []


# items whose truth is (n, vocab_size) and holds the target's one-hot term: its -1 at each row's label, over n
_ONE_HOT_ITEMS = {"ex2.dlogits", "ex1.dlogits", "ex1.dnorm_logits"}


def label_entries(ev: Evidence) -> list[Finding]:
    """Recognise a (n, vocab) gradient that is right everywhere except at some rows' label entries (row i, Yb[i])."""
    v, t, yb = ev.value, ev.truth, ev.fx.Yb
    n = yb.shape[0]
    if not ev.comparison.shape_ok or v.dim() != 2 or v.shape[0] != n or v.shape[1] <= int(yb.max()):
        return []  # no label column to be wrong at: an (n, 1) gradient, say
    if not torch.isfinite(v).all():
        return []
    wrong = (v - t).abs() > 1e-8 + 1e-5 * t.abs()  # locate's test
    rows = torch.arange(n)
    at_label = torch.zeros_like(wrong)
    at_label[rows, yb] = True
    if not bool(wrong.any()) or bool((wrong & ~at_label).any()):
        return []
    bad = wrong[rows, yb].nonzero().flatten()
    shown = ", ".join(f"row {int(r)} at column {int(yb[r])} ('{ITOS[int(yb[r])]}')" for r in bad[:6])
    entries = shown + (f" and {bad.numel() - 6} more" if bad.numel() > 6 else "")
    count = f"all {n} rows" if bad.numel() == n else f"{bad.numel()} of {n} rows"
    diff = (v - t)[bad, yb[bad]]
    c = float(diff.mean())
    same = cmp.loosely(diff, torch.full_like(diff, c))
    sign = "too large" if bool((diff > 0).all()) else "too small" if bool((diff < 0).all()) else ""
    if bad.numel() == 1:
        how = f"There your value is {sign}."
    elif same and sign:
        how = f"There your values are {sign} by the same amount in every row."
    elif sign:
        how = f"There your values are {sign}, by amounts that differ from row to row."
    else:
        how = "There your values are off by amounts that differ from row to row, in size and in sign."
    case = None
    if ev.item_id in _ONE_HOT_ITEMS and same:  # which slip of the one-hot term, by the size of the difference
        sizes = {
            "one-hot-missing": 1 / n,
            "one-hot-undivided": 1 / n - 1,
            "one-hot-added": 2 / n,
            "one-hot-twice": -1 / n,
        }
        case = next((k for k, size in sizes.items() if abs(c - size) <= 1e-3 * abs(size)), None)
    # which slip it is, said at hint level only: a bundle below hint has no such text, and says how instead
    slip = texts.text(f"detail.label-entries.{case}", "hint") if case else ""
    hint = slip.format(inv_n=f"{1 / n:.6g}") or how
    return [finding("label-entries", count=count, entries=entries, how={"diagnose": how, "hint": hint})]


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


RECOGNISERS: tuple[Callable[[Evidence], list[Finding]], ...] = (
    shape_mismatch,
    repeated_rows,
    known_variants,
    missing_eps,
    reduced_wrong_dim,
    generic,
    missing_factor,
    label_entries,
)


def link(items) -> None:
    """Complete the messages that depend on other items, once every item of a submission is judged.

    Ex4's tanh-preact: the error is in dhpreact, which the student never returns; it reaches some of Ex4's
    gradients and not others (db1 is zero whatever dhpreact is), so each message names the items that actually
    fail with it.
    """
    shared: dict[str, list] = {}
    for item in items:
        for f in item.findings:
            if f.trap == "tanh-preact" and item.exercise == "ex4":
                shared.setdefault(item.exercise, []).append((item, f))
    for pairs in shared.values():
        names = [item.name for item, _ in pairs]
        for item, f in pairs:
            others = [k for k in names if k != item.name]
            also = f" {_and(others)} {'fails' if len(others) == 1 else 'fail'} with it too." if others else ""
            f.details = {**f.details, "where": f" It reaches {item.name} through dhpreact.{also}"}


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def rounding_mistakes(ev: Evidence) -> list[Finding]:
    """Return the known-wrong backward passes (a dropped path, Bessel, tanh of hpreact, no eps...) a value matches.

    For a value that passes only thanks to compare.NOISE_SLACK: those mistakes can move a gradient by about as
    little as float32 rounding does (a missing eps by 1.7e-8 where the allowance is 2.2e-8), so matching one of
    them still fails. Both recognisers need the value far closer to the mistake than to the truth, which a
    right answer rounded otherwise never is.
    """
    return known_variants(ev) or missing_eps(ev)


def diagnose(ev: Evidence) -> list[Finding]:
    """Return the traps a failed item's values show, most specific first; at most one value diagnosis."""
    if ev.item_id not in ("ex1.dC", "ex4.dC"):
        recognisers = [r for r in RECOGNISERS if r is not repeated_rows]
    else:
        recognisers = list(RECOGNISERS)
    for recognise in recognisers:
        try:
            found = recognise(ev)
        except (IndexError, RuntimeError, ValueError):  # a recogniser's own blind spot costs its trap, not the item
            continue
        if found:
            return found
    return []


def dlogits_note(value: torch.Tensor, fx: Fixture) -> list[Finding]:
    """Recognise a passing ex1 dlogits whose logit_maxes path is left out, or broadcast over the whole row."""
    truth, direct = fx.truth["dlogits"], fx.truth["dnorm_logits"]
    if value.shape != truth.shape:
        return []
    n, k = truth.shape
    rows = torch.arange(n)
    at_max = fx.tensors["logits"].max(1).indices
    # the max path spread over every entry of a row: off the argmax, value is dnorm_logits + dlogit_maxes
    spread = direct + fx.truth["dlogit_maxes"]  # (32, 27)
    off = torch.ones_like(truth, dtype=torch.bool)
    off[rows, at_max] = False
    moved = off & (spread != direct)  # entries where the broadcast is not lost to rounding
    if bool(moved.any()) and bool((value[moved] == spread[moved]).all()):
        bad_rows = moved.any(1).nonzero().flatten()
        return [finding("dlogits-max-broadcast", rows=_list(bad_rows, 8))]
    carried = truth[rows, at_max] != direct[rows, at_max]  # rows where the max path is not lost to rounding
    if not bool(carried.any()):
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
    if value.dim() >= 2 and value.shape[0] > 1:
        rows = wrong.reshape(wrong.shape[0], -1).any(1).nonzero().flatten()
        cols = wrong.reshape(wrong.shape[0], wrong.shape[1], -1).any(2).any(0).nonzero().flatten()
        if 0 < rows.numel() <= wrong.shape[0] // 2:
            where = "Correct except rows " + _list(rows) + "."
        elif wrong.shape[1] > 1 and 0 < cols.numel() <= wrong.shape[1] // 2:
            where = "Correct except columns " + _list(cols) + "."
    elif value.dim() >= 2:  # one row, e.g. (1, 64): speak of its columns
        cols = wrong.reshape(wrong.shape[1], -1).any(1).nonzero().flatten()
        if 0 < cols.numel() <= wrong.shape[1] // 2:
            where = "Correct except columns " + _list(cols) + "."
    elif 0 < nwrong <= total // 2:
        where = "Correct except positions " + _list(wrong.nonzero().flatten()) + "."
    worst = tuple(int(i) for i in torch.nonzero((value - truth).abs() == (value - truth).abs().max())[0])
    return f"{where} {nwrong} of {total} entries differ; the largest difference is at {list(worst)}.".strip()


def _list(idx: torch.Tensor, limit: int = 10) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    return shown + (f" and {idx.numel() - limit} more" if idx.numel() > limit else "")
