"""The trap catalogue: each classic backprop bug as an id, a recogniser and a message.

Recognisers judge the values a submission returned (and, for mutates-input and uses-autograd, what its code did
while it ran), never its source text. Most compare against a known-wrong variant that autograd computes on the
same inputs (see fixture.Variant); the rest test the pattern of the error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from grader.grading import compare as cmp
from grader.sandbox import forget
from grader.spec.policy import LEVELS
from grader.truth.corpus import ITOS
from grader.truth.fixture import EX1_ORDER, Fixture, Variant

DEFAULT_LEVEL = "diagnose"


def check_level(level: str) -> str:
    """Return level, or raise ValueError naming the allowed ones."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


def pick(text, level: str) -> str:
    """Return a text at a level: a plain string, or a {level: text} dict falling back to the next lower level."""
    if not isinstance(text, dict):
        return "" if text is None else str(text)
    for lv in reversed(LEVELS[: LEVELS.index(level) + 1]):
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
    """

    id: str
    diagnose: str
    hint: str
    explain: str
    concept: str
    fails: bool = True  # False: the item may still pass, the trap is a note

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
        Trap(
            "dC-repeated-rows",
            "Rows of C that this batch looks up more than once are wrong: {rows}. Rows looked up exactly once "
            "are right. Each lookup of a row sends it a gradient and all of them must be added up; your update "
            "keeps only one of them.",
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
            "The embedding lookup fetches one row of C per (sample, position), from a table with only one row per "
            "character, so common characters are fetched many times in one batch. The gradient of a row is the "
            "sum over every place it was fetched. An indexed in-place update reads all repeated positions before "
            "it writes any of them, so the last write wins: nothing raises, the shape is right, and only the "
            "repeated rows come out too small.",
        ),
        Trap(
            "dcounts-one-path",
            "counts is used twice in the forward pass (by probs and by counts_sum), but your dcounts only has "
            "{present}: the gradient that arrives through {missing} is missing, and a variable used twice "
            "receives the sum of both contributions.",
            "counts is used twice in the forward pass (probs = counts * counts_sum_inv, and "
            "counts_sum = counts.sum(1)), but your dcounts only has {present}. Add the gradient that arrives "
            "through {missing}: a variable used twice receives the sum of both contributions.",
            "Whenever a forward variable feeds two operations, the multivariate chain rule adds the gradients "
            "flowing back along each path (micrograd's `+=`). dcounts = dprobs * counts_sum_inv (from probs) "
            "plus dcounts_sum broadcast across the row (from counts_sum).",
            "Whenever a forward variable feeds two operations, the multivariate chain rule adds the gradients "
            "flowing back along each path, as micrograd accumulates into a node used twice. counts reaches the "
            "loss directly through probs and again through the row sums.",
        ),
        Trap(
            "dbndiff-one-path",
            "bndiff is used twice in the forward pass (by bnraw, and by bndiff2 on the way to the variance), but "
            "your gradient only has {present}: the gradient that arrives through {missing} is missing.",
            "bndiff is used twice in the forward pass (bnraw = bndiff * bnvar_inv, and bndiff2 = bndiff**2 "
            "which leads to the variance), but your gradient only has {present}. Add the gradient that arrives "
            "through {missing}.",
            "bndiff reaches the loss along two paths: directly through bnraw, and through bndiff2 -> bnvar -> "
            "bnvar_inv -> bnraw. The second one is easy to forget because it comes back through the variance. "
            "The full gradient is the sum: bnvar_inv * dbnraw + 2 * bndiff * dbndiff2.",
            "bndiff reaches the loss along two paths: directly through the normalisation, and through its square, "
            "the variance and the inverse standard deviation. The second one is easy to forget because it comes "
            "back through the variance. The full gradient is the sum of both.",
        ),
        Trap(
            "dhprebn-one-path",
            "hprebn is used twice in the forward pass (by bndiff, and by the batch mean bnmeani), but your "
            "gradient only has {present}: the gradient that arrives through {missing} is missing.",
            "hprebn is used twice in the forward pass (bndiff = hprebn - bnmeani, and bnmeani = mean of hprebn), "
            "but your gradient only has {present}. Add the gradient that arrives through {missing}.",
            "Every element of hprebn influences the loss directly (through bndiff) and through the batch mean "
            "bnmeani, which every row subtracts. The mean's gradient is spread back evenly: each row gets "
            "1/n of dbnmeani. The full gradient is the sum of both.",
            "Every element of hprebn influences the loss directly and through the batch mean, which every row "
            "subtracts. A mean spreads its gradient back evenly over the rows it averaged. The full gradient is "
            "the sum of both paths.",
        ),
        Trap(
            "dlogits-one-path",
            "Passes, but your dlogits does not add the path through logit_maxes at each row's max entry (it skips "
            "it, or adds it elsewhere; the row max takes one entry per row). "
            "Its contribution is almost exactly zero, because subtracting the row max only guards the "
            "exponential against overflow and cannot change the probabilities, so the check passes.",
            "Passes, but your dlogits does not add the path through logit_maxes at each row's max entry (it "
            "skips it, or adds it elsewhere; logits.max(1) takes one entry per row). Its contribution is almost "
            "exactly zero, because subtracting the row max only guards exp() "
            "against overflow and cannot change the probabilities, so the check passes. For a complete atomic "
            "backward, add dlogit_maxes at each row's max position (a one-hot of the argmax).",
            "logit_maxes only shifts each row of logits, and softmax is invariant to shifts, so the loss does not "
            "depend on it: dlogit_maxes is ~1e-9, float noise. The full gradient still has two paths: "
            "dnorm_logits directly, plus dlogit_maxes routed to the argmax entry of each row.",
            "logit_maxes only shifts each row of logits, and softmax does not change when a row is shifted, so the "
            "loss does not depend on it and its gradient is float noise. The full gradient still has two paths: "
            "the direct one, and the one through the max, which arrives only at each row's max entry.",
            fails=False,
        ),
        Trap(
            "dlogits-max-broadcast",
            "Passes, but your dlogits adds dlogit_maxes to every entry of each row (a broadcast), in rows {rows}. "
            "The max of a row uses only one entry of it, so the entries off each row's max receive a gradient "
            "through it that they should not. The check passes only because this gradient is almost exactly zero.",
            "Passes, but your dlogits adds dlogit_maxes to every entry of each row (a broadcast), in rows {rows}. "
            "The max of a row uses only one entry of it, so this path's gradient belongs at that row's max "
            "position and nowhere else: add dlogit_maxes times a one-hot of logits.max(1).indices. The check "
            "passes only because this gradient is almost exactly zero.",
            "Backward, a max acts like indexing: the gradient flows to the selected element only, as it does for "
            "a lookup. `dnorm_logits + dlogit_maxes` broadcasts it over the whole row, which is the gradient of "
            "a row sum, not of a row max: F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * "
            "dlogit_maxes puts it in the right place.",
            "Backward, a max acts like indexing: the gradient flows to the selected element only, as it does for "
            "an embedding lookup. Spreading it over the whole row would be the gradient of a row sum, not of a "
            "row max.",
            fails=False,
        ),
        Trap(
            "bessel",
            "Off by the constant factor {ratio}: {where}. The forward pass divides by n-1 when it computes bnvar "
            "(Bessel's correction); your backward divides by n there.",
            "Off by the constant factor n/(n-1) = {factor}: {where}. The forward pass divides by n-1 when it "
            "computes bnvar (Bessel's correction), so its backward uses 1/(n-1) as well. You used 1/n.",
            "The lecture's BatchNorm uses the unbiased variance, 1/(n-1) * sum(bndiff2), in training (and so at "
            "test time too, avoiding the train/test mismatch of the original paper). The derivative of "
            "1/(n-1) * sum(x) with respect to each x is 1/(n-1); with n=32 the difference is only 3%, which is "
            "why this bug is easy to miss by eye.",
            "The lecture's BatchNorm uses the unbiased variance (divided by n-1) in training, and so at test time "
            "too, avoiding the train/test mismatch of the original paper. Its derivative carries the same "
            "divisor; with a batch of 32 the difference is only 3%, which is why this bug is easy to miss by eye.",
        ),
        Trap(
            "bessel-inverted",
            "{where} is too small by the factor {ratio}, Bessel's correction squared: the ratio n over n-1 that "
            "the forward pass's division by n-1 brings into the variance's term is upside down in your backward, "
            "as n-1 over n.",
            "{where} is ((n-1)/n)**2 times the true one (off by {ratio}): where the variance's term carries "
            "n/(n-1) = {factor}, from the division by n-1 in bnvar, you wrote (n-1)/n.",
            "The variance is 1/(n-1) * sum(bndiff2), while the closed form's other terms carry the batch mean's "
            "1/n: so its variance term is n/(n-1) * bnraw * (dhpreact * bnraw).sum(0), inside bngain * bnvar_inv / "
            "n * (...). Writing the ratio upside down makes that term ((n-1)/n)**2 too small, about 6% with n=32, "
            "which is easy to miss by eye.",
            "The variance divides by n-1 and the closed form's other terms by n, so the variance's term carries the "
            "ratio of the two, n over n-1. Written upside down, it makes that term too small by the square of the "
            "ratio: about 6% with a batch of 32, which is easy to miss by eye.",
        ),
        Trap(
            "mean-divisor",
            "The batch mean's term of {where} is {ratio} times too large: the forward pass divides by n when it "
            "computes the batch mean, and your backward divides that term by n-1.",
            "The batch mean's term of {where} is n/(n-1) = {factor} times too large: the batch mean divides by n, "
            "so its gradient gives each row 1/n of the summed incoming gradient (a .mean(0) or .sum(0) / n); you "
            "divided by n-1, which belongs to the variance only.",
            "BatchNorm uses two divisors: bnmeani = hprebn.sum(0) / n, and bnvar = bndiff2.sum(0) / (n-1). Each "
            "path's backward keeps its own: the mean's term is -dbndiff.sum(0) / n on every row, the variance's "
            "term carries 1/(n-1). Mixing them up moves almost every entry by a few percent.",
            "BatchNorm uses two divisors: the mean divides by the batch size, the unbiased variance by one less. "
            "Backward, each path keeps its own divisor; here the mean's term got the variance's, which moves almost "
            "every entry by a few percent.",
        ),
        Trap(
            "reduced-wrong-dim",
            "{terms} of your dhprebn {verb} over dimension 1, giving one number per example, where BatchNorm's "
            "batch statistics are taken over dimension 0, one number per hidden unit.",
            "{terms} of your dhprebn {verb} over dim 1 (across each example's hidden units); BatchNorm's mean and "
            "variance are taken over dim 0, across the batch, so every sum or mean in its backward is over dim 0 "
            "too: .sum(0) or .mean(0, keepdim=True), not dim=1.",
            "bnmeani and bnvar are (1, n_hidden): one statistic per hidden unit, computed along the batch. Their "
            "backward terms are sums along the batch as well, (dhpreact * bnraw).sum(0) and dhpreact.sum(0). A "
            "sum over dim 1 with keepdim=True is (n, 1), which still broadcasts against (n, n_hidden): nothing "
            "raises, and every entry is wrong.",
            "BatchNorm keeps one mean and one variance per hidden unit, taken across the batch. Their backward "
            "terms are sums across the batch too; a sum across the hidden units of each example instead still "
            "broadcasts to the right shape, so nothing raises and every entry is wrong.",
        ),
        Trap(
            "label-entries",
            "Wrong only at the label entries (in each row, the column of the character that comes next, Yb), in "
            "{count}: {entries}. Every other entry is right. {how}",
            "Wrong only at the label entries (row i, column Yb[i]), in {count}: {entries}. Every other entry is "
            "right. {how}",
            "The loss reads one entry per row, logprobs[range(n), Yb], so the target's one-hot vector enters the "
            "gradient only there: dlogits = (softmax(logits) - one_hot(Yb)) / n, the lecture's "
            "`dlogits[range(n), Yb] -= 1` before `dlogits /= n`. Leaving out the -1, or subtracting it after the "
            "division, changes exactly those entries and nothing else.",
            "The loss reads one entry per row, the probability given to the right next character, so the target "
            "enters the gradient only at those entries. A mistake in the target's term changes exactly those "
            "entries and nothing else.",
        ),
        Trap(
            "missing-eps",
            "BatchNorm adds a small eps (1e-5) to the variance before the inverse square root, and {where} leaves "
            "it out. It matters only where the variance is small, so most entries still match: the ones that "
            "differ are in columns {cols}.",
            "BatchNorm adds a small eps (1e-5) to the variance before the inverse square root, and {where} leaves "
            "it out. It matters only where the variance is small, so most entries still match: the ones that "
            "differ are in columns {cols}. Differentiate (bnvar + 1e-5)**-0.5, the function the forward "
            "computed: its derivative is -0.5 * (bnvar + 1e-5)**-1.5.",
            "bnvar_inv = (bnvar + 1e-5)**-0.5, so dbnvar = -0.5 * (bnvar + 1e-5)**-1.5 * dbnvar_inv. The eps only "
            "keeps a column with a tiny variance from dividing by zero, so dropping it changes few entries by "
            "little, which is why it survives a look at the numbers.",
            "The eps only keeps a column with a tiny variance from dividing by zero, but it is part of the function "
            "the forward pass computed, so its derivative keeps it too. Dropping it changes few entries by "
            "little, which is why it survives a look at the numbers.",
        ),
        Trap(
            "missing-factor",
            "Right except for one factor: your result is the true gradient {relation} {factor} {shape}. {advice}",
            "Right except for one factor: your result is the true gradient {relation} {factor} {shape}. {advice}",
            "The chain rule multiplies the incoming gradient by every local derivative on the way. When one "
            "factor of a product (out = a * b gives da = b * dout) is dropped or applied twice, the result is off "
            "by exactly that tensor, entry by entry.",
            "The chain rule multiplies the incoming gradient by every local derivative on the way. When one "
            "factor of a product is dropped or applied twice, the result is off by exactly that tensor, entry by "
            "entry, and the grader can tell which tensor it is.",
        ),
        Trap(
            "tanh-preact",
            "Your tanh derivative is written with tanh's input hpreact, in a formula that takes tanh's output.{where}",
            "The tanh derivative must be written with tanh's output: 1 - h**2, where h = tanh(hpreact). "
            "You used 1 - hpreact**2, its input.{where}",
            "d/dx tanh(x) = 1 - tanh(x)**2. The forward pass already computed tanh(hpreact) and called it h, "
            "so the local derivative is 1 - h**2 and dhpreact = (1 - h**2) * dh.",
            "The derivative of tanh is most simply written with tanh's own output, which the forward pass already "
            "computed and called h. Writing it with the input instead gives a different function.",
        ),
        Trap(
            "shape-mismatch",
            "Returned shape {shape}, but {var} has shape {expected}: every gradient has exactly its variable's "
            "shape. {detail}",
            "Returned shape {shape}, but {var} has shape {expected}: every gradient has exactly its variable's "
            "shape. {detail}",
            "Broadcasting in the forward pass (a (1, 64) bias added to every row) is a sum in the backward "
            "pass, and a sum in the forward pass is a broadcast in the backward pass. After summing, keep the "
            "dimension the variable has (keepdim=True) or drop the one it doesn't. A wrong shape can still "
            "produce right numbers after broadcasting, which is exactly why the grader checks shapes strictly.",
            "Broadcasting in the forward pass (a bias added to every row) is a sum in the backward pass, and a sum "
            "in the forward pass is a broadcast in the backward pass. After summing, keep the dimension the "
            "variable has or drop the one it does not have. A wrong shape can still produce right numbers after "
            "broadcasting, which is exactly why the grader checks shapes strictly.",
        ),
        Trap(
            "sign-flip",
            "Every entry has the wrong sign: your result is exactly minus the true gradient. The sign is lost in "
            "one of the local derivatives you used; a subtraction, a negation or a logarithm are the usual places.",
            "Every entry has the wrong sign: your result is exactly -1 times the true gradient. Check the sign "
            "of the local derivative you used (d(a - b)/db = -1, d(-x)/dx = -1, d log(x)/dx = +1/x).",
            "A flipped sign usually comes from a subtraction in the forward pass (norm_logits = logits - "
            "logit_maxes, bndiff = hprebn - bnmeani) or from the minus in the loss.",
            "A flipped sign usually comes from a subtraction in the forward pass (the row max, the batch mean) or "
            "from the minus in the loss.",
        ),
        Trap(
            "scaled",
            "Right up to a constant factor: every entry is {factor} times the true value{named}. {advice}",
            "Right up to a constant factor: every entry is {factor} times the true value{named}. {advice}",
            "A constant factor means the structure of your gradient is right and one scalar is off: a 1/n "
            "from a mean, an exponent brought down (x**k -> k * x**(k-1)), or a factor applied twice.",
            "A constant factor means the structure of your gradient is right and one scalar is off: the divisor "
            "of a mean, an exponent brought down by the power rule, or a factor applied twice.",
        ),
        Trap(
            "transposed",
            "Right but transposed: your result is the transpose of the true gradient.",
            "Right but transposed: your result is the transpose of the true gradient. For out = A @ B, "
            "dA = dout @ B.T and dB = A.T @ dout; let the shapes tell you which side each factor goes on.",
            "Matrix-product gradients are easiest to get from the shapes: dA must have A's shape, and only one "
            "arrangement of dout and B (transposed or not) produces it.",
            "Matrix-product gradients are easiest to get from the shapes: the gradient of a factor has that "
            "factor's shape, and only one arrangement of the incoming gradient and the other factor produces it.",
        ),
        Trap(
            "hardcoded-size",
            "Right on the lecture's fixture, but {how} on a second batch with other sizes (another n, "
            "block_size, n_embd, n_hidden and seed). Some size is written into your code as a number.",
            "Right on the lecture's fixture, but {how} on a second batch with other sizes (another n, "
            "block_size, n_embd, n_hidden and seed). Some size is written into your code (32, 27, 64, 10, 3, "
            "200 or a range(32)); take sizes from the tensors instead (n, Xb.shape, emb.shape, C.shape, ...).",
            "Every item is graded on two geometries and passes only if both pass; the second one's numbers are "
            "not shown. Typical culprits: view(32, 3, 10) instead of view(emb.shape), range(32) instead of "
            "range(n), torch.zeros(32, 27) instead of torch.zeros_like(logits).",
            "Every item is graded on two geometries and passes only if both pass; the second one's numbers are "
            "not shown. Typical culprits are a reshape, a range or a new tensor whose sizes are typed in.",
        ),
        Trap(
            "mutates-input",
            "Your function changed its input {names} in place. Other steps of a real backward pass still read "
            "{first}, so they would see corrupted values; the grader fails this even when your returned values "
            "are right.",
            "Your function changed its input {names} in place. In a real backward pass {first} is still read by "
            "other steps, which would then see corrupted values; the grader fails this even when your returned "
            "values are right. Work on a copy: start from {first}.clone() before +=, -=, /= or index writes.",
            "`d = dnorm_logits; d += ...` does not copy: d and dnorm_logits are the same tensor, so the += "
            "rewrites dnorm_logits too. In the lecture's backward, dlogit_maxes is computed from dnorm_logits, "
            "and modifying dnorm_logits in place afterwards leaves the rest of the pass inconsistent. .clone() "
            "(or an out-of-place expression) keeps the original intact.",
            "Giving a tensor a new name does not copy it: an in-place update through the new name rewrites the "
            "original too. Other steps of the backward pass read that original, so it must stay intact.",
        ),
        Trap(
            "uses-autograd",
            "Your code called {calls}{at}. The point of this exercise is to derive the gradient by hand; autograd "
            "is what the grader compares you against.",
            "Your code called {calls}{at}. The point of this exercise is to derive the gradient by hand; autograd is "
            "what the grader compares you against. Remove it and write out the chain rule for this step.",
            "The grader runs your function with gradient tracking off and watches .backward(), "
            "torch.autograd.*, requires_grad_(), enable_grad() and torch.func. Any use fails the item.",
            "The grader runs your function with gradient tracking off and watches every way into autograd. Any use "
            "fails the item.",
        ),
        Trap(
            "stale-state",
            "Step 1 matched autograd, but from step {step} on {grads} drift away. Your backward keeps something "
            "between calls (an accumulator created once at module level, a mutable default argument, or a "
            "global), so each call builds on the last one: the forgotten zero_grad.",
            "Step 1 matched autograd, but from step {step} on {grads} drift away. Your backward keeps something "
            "between calls (an accumulator created once at module level, a default argument like `cache={{}}`, "
            "or a global), so each call builds on the last one: the forgotten zero_grad. Create every gradient "
            "from fresh tensors inside the function.",
            "The training check calls backward on several consecutive SGD steps and compares each with "
            "autograd. A stateless backward is right on every step; one that accumulates is right only the "
            "first time, then drifts further with every call.",
            "The training check calls backward on several consecutive SGD steps and compares each with "
            "autograd. A stateless backward is right on every step; one that accumulates is right only the "
            "first time, then drifts further with every call.",
        ),
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
    """Record a trap with the details its message needs (a detail may be a {level: text} dict)."""
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


def _size_one_detail(ev: Evidence) -> dict | None:
    """Explain a result whose values are right and whose shape differs only by dimensions of size 1."""
    v, t = ev.value, ev.truth
    if _squeezed(v.shape) != _squeezed(t.shape) or not cmp.close(v.reshape(t.shape), t):
        return None
    if v.dim() < t.dim():  # a summed dimension was dropped: keepdim is missing
        d = _unit_dims(t.shape)[0]
        return {
            "diagnose": f"The values are right; only the summed dimension {d} (of size 1) is missing.",
            "hint": f"The values are right; only the summed dimension {d} (of size 1) is missing: sum with "
            f"keepdim=True, e.g. .sum({d}, keepdim=True).",
        }
    if v.dim() > t.dim():  # a size-1 dimension the variable does not have: keepdim is one too many
        d = _unit_dims(v.shape)[0]
        return {
            "diagnose": f"The values are right, but your result has an extra dimension {d} of size 1 that "
            f"{ev.var} does not have.",
            "hint": f"The values are right, but your result has an extra dimension {d} of size 1 that {ev.var} "
            f"does not have: drop keepdim=True and sum with .sum({d}).",
        }
    return {
        "diagnose": "The values are right, but the dimension of size 1 is in the wrong place.",
        "hint": f"The values are right, but the dimension of size 1 is in the wrong place: sum with keepdim=True "
        f"over the dimension {ev.var} has as 1, or use .view({ev.var}.shape).",
    }


def _summed_detail(ev: Evidence) -> dict | None:
    """Explain a result that needs one more sum over a dimension the forward pass broadcast."""
    v, t = ev.value, ev.truth
    for d in range(v.dim()):
        keep = v.dim() == t.dim()
        if keep and not (t.shape[d] == 1 and v.shape[d] != 1):
            continue
        if v.dim() not in (t.dim(), t.dim() + 1) or not cmp.close(v.sum(d, keepdim=keep), t, 1e-4, 1e-6):
            continue
        code = f".sum({d}, keepdim=True)" if keep else f".sum({d})"
        return {
            "diagnose": f"The values match once summed over dimension {d}, along which {ev.var} was broadcast "
            f"in the forward pass: that sum is missing.",
            "hint": f"The values match after {code}: {ev.var} was broadcast along dim {d} in the forward pass, "
            f"so its gradient sums over that dimension.",
        }
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
# the detail of a shape-mismatch whose values are a sum or mean of the right terms over the wrong dimension, or a
# mean over the right one (dict literals: `grade release` strips the hint text of a diagnose course)
WRONG_DIM = {
    "diagnose": "The values match {noun} over dimension {e}, the wrong one: {var} was broadcast along dimension {d} "
    "in the forward pass ({along}), not along dimension {e}.",
    "hint": "The values match {code}, over the wrong dimension: {var} was broadcast along dim {d} in the forward "
    "pass, so its gradient sums over dim {d}: {right}.",
}
MEAN_NOT_SUM = {
    "diagnose": "The values match a mean over dimension {d}: the right dimension, but {var} was broadcast along it in "
    "the forward pass, so its contributions add up, and a mean divides them by the size of that dimension.",
    "hint": "The values match {code}: the right dimension, but {var} was broadcast along it in the forward pass, so "
    "its gradient adds the contributions up: {right}.",
}


def _wrong_dim_detail(ev: Evidence) -> dict | None:
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
                said = MEAN_NOT_SUM if e == d else WRONG_DIM
                noun = "a sum" if op == "sum" else "a mean"
                fill = {"noun": noun, "e": e, "d": d, "var": ev.var, "along": _ALONG[d], "code": code, "right": right}
                return {level: text.format(**fill) for level, text in said.items()}
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
        detail = {
            "diagnose": f"The values match once broadcast to {_fmt_shape(t.shape)}, but your result does not have "
            f"that full shape.",
            "hint": f"The values match after broadcasting to {_fmt_shape(t.shape)}, but the gradient must have that "
            f"full shape: expand it to {ev.var}'s shape.",
        }
    elif v.dim() == 2 and v.T.shape == t.shape and cmp.close(v.T.contiguous(), t):
        detail = ""  # the transposed finding says it
        found.append(finding("transposed"))
    elif ev.comparison.reshape_match:
        detail = {
            "diagnose": "The same numbers, in another arrangement.",
            "hint": f"The same numbers in another arrangement: reshape it to {ev.var}'s shape "
            f"(e.g. .view({ev.var}.shape)).",
        }
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


@forget.on_fork_forget
def _forget_texts() -> None:
    """A sandbox child renders no message: it loses every trap text, so none (hint or full) can be copied out."""
    for key, trap in list(TRAPS.items()):
        TRAPS[key] = dataclasses.replace(trap, diagnose="", hint="", explain="", concept="")


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
            "missing": {"diagnose": "probs", "hint": "probs (dprobs * counts_sum_inv)"},
        },
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bndiff2")),
        {
            "present": "the direct path through bnraw",
            "missing": {"diagnose": "bndiff2", "hint": "bndiff2 (2 * bndiff * dbndiff2)"},
        },
    ),
    (
        "dbndiff-one-path",
        {"ex1.dbndiff"},
        _cut(("bndiff", "bnraw")),
        {
            "present": "the path through bndiff2",
            "missing": {"diagnose": "bnraw", "hint": "bnraw (bnvar_inv * dbnraw)"},
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
            "missing": {
                "diagnose": "the batch mean bnmeani (spread evenly over the rows)",
                "hint": "the batch mean bnmeani (1/n of dbnmeani per row)",
            },
        },
    ),
    (
        "dhprebn-one-path",
        {"ex1.dhprebn"},
        _cut(("hprebn", "bndiff")),
        {"present": "the path through bnmeani", "missing": {"diagnose": "bndiff", "hint": "bndiff (dbndiff itself)"}},
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
            where = (
                {
                    "diagnose": "your dbndiff2 is too small by that factor",
                    "hint": "your dbndiff2 is (n-1)/n times the true one",
                }
                if ev.item_id == "ex1.dbndiff2"
                else {
                    "diagnose": "the variance term of your BatchNorm backward is too small by that factor",
                    "hint": "the variance term of your BatchNorm backward is (n-1)/n times too small",
                }
            )
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
    eps-free variant than to the truth.
    """
    if not ev.comparison.shape_ok or ev.item_id not in _EPS_ITEMS:
        return []
    wrong = ev.fx.variant(Variant(no_eps=True))["d" + ev.var]
    to_truth = float((ev.value - ev.truth).abs().max())
    to_wrong = float((ev.value - wrong).abs().max())
    gap = float((wrong - ev.truth).abs().max())
    if not (gap > 0 and to_wrong <= 0.1 * to_truth and to_truth >= 0.5 * gap):
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
                    advice=(
                        {
                            "diagnose": f"A factor of {name} is missing: the chain rule's other factor, beside this "
                            f"step's local derivative.",
                            "hint": f"A factor of {name} is missing: the chain rule multiplies this step's local "
                            f"derivative by it.",
                        }
                        if name.startswith("the upstream")
                        else {
                            "diagnose": f"A factor of {name} is missing from this step's local derivatives.",
                            "hint": f"A factor of {name} is missing: check this step's local derivatives for the "
                            f"one that multiplies by it.",
                        }
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


_NAMED_FACTORS = (
    # (value as a function of n, how the factor is named, advice by level: dict literals, so that `grade release`
    # strips the hint text from a diagnose course's bundle)
    (
        lambda n: n,
        ", which is n, the batch size",
        {
            "diagnose": "A division by n (from the mean in the loss, or the batch mean) is missing or applied twice.",
            "hint": "A 1/n from the mean in the loss or the batch mean is missing or doubled.",
        },
    ),
    (
        lambda n: 1 / n,
        ", which is one over n",
        {
            "diagnose": "A division by n is applied where it does not belong, or twice.",
            "hint": "A 1/n is applied where it does not belong, or twice.",
        },
    ),
    (
        lambda n: n - 1,
        ", which is n-1",
        {
            "diagnose": "The division by n-1 from the variance is missing.",
            "hint": "A 1/(n-1) from the variance is missing.",
        },
    ),
    (
        lambda n: 1 / (n - 1),
        ", which is one over n-1",
        {
            "diagnose": "A division by n-1 is applied twice or where it does not belong.",
            "hint": "A 1/(n-1) is applied twice or where it does not belong.",
        },
    ),
    (
        lambda n: n / (n - 1),
        ", which is n over n-1",
        {
            "diagnose": "A division by n-1 stands where the division is by n.",
            "hint": "A 1/(n-1) stands where 1/n belongs (the batch mean's divisor, or the closed form's 1/n in "
            "front): only the variance divides by n-1.",
        },
    ),
    (
        lambda n: (n - 1) / n,
        ", which is n-1 over n",
        {
            "diagnose": "A division by n stands where the division is by n-1.",
            "hint": "A 1/n stands where 1/(n-1) belongs: the variance divides by n-1 (Bessel's correction).",
        },
    ),
    (
        lambda n: 2.0,
        "",
        {
            "diagnose": "A factor 2 is doubled, for example the power rule applied twice.",
            "hint": "A factor 2 is doubled, e.g. from x**2 -> 2*x applied twice.",
        },
    ),
    (
        lambda n: 0.5,
        ", which is one half",
        {
            "diagnose": "A factor 2 is missing: the power rule brings the exponent down.",
            "hint": "A factor 2 is missing, e.g. d(x**2)/dx = 2*x.",
        },
    ),
)


def _name_factor(c: float, n: int) -> tuple[str, dict | str]:
    for value, label, advice in _NAMED_FACTORS:
        v = value(n)
        if abs(c - v) <= 1e-3 * abs(v):
            return label, advice
    return "", {
        "diagnose": "Some constant is added, dropped or applied twice.",
        "hint": "Look for a constant you added, dropped or applied twice.",
    }


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
# what went wrong with that term, by the difference at the label entries (hint level only: `grade release` empties
# these for a diagnose course, and the diagnose text is said instead)
_ONE_HOT_HINTS = {
    "missing": {
        "diagnose": "",
        "hint": "There your values are 1/n = {inv_n} too large: the -1 of the one-hot target is missing (subtract "
        "1 at [range(n), Yb], then divide everything by n).",
    },
    "undivided": {
        "diagnose": "",
        "hint": "There your values are 1 - 1/n too small: the 1 is subtracted after the division by n, so it is "
        "not divided (subtract it first, then divide by n).",
    },
    "added": {
        "diagnose": "",
        "hint": "There your values are 2/n too large: the one-hot target's 1 is added instead of subtracted.",
    },
    "twice": {
        "diagnose": "",
        "hint": "There your values are 1/n too small: the one-hot target's 1 is subtracted twice.",
    },
}


def label_entries(ev: Evidence) -> list[Finding]:
    """Recognise a (n, vocab) gradient that is right everywhere except at some rows' label entries (row i, Yb[i])."""
    v, t, yb = ev.value, ev.truth, ev.fx.Yb
    n = yb.shape[0]
    if not ev.comparison.shape_ok or v.dim() != 2 or v.shape[0] != n or not torch.isfinite(v).all():
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
        sizes = {"missing": 1 / n, "undivided": 1 / n - 1, "added": 2 / n, "twice": -1 / n}
        case = next((k for k, size in sizes.items() if abs(c - size) <= 1e-3 * abs(size)), None)
    hint = (pick(_ONE_HOT_HINTS[case], "hint") if case else "").format(inv_n=f"{1 / n:.6g}") or how
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
        found = recognise(ev)
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
