"""The seeded model, the fixed batch, the chunked forward pass and autograd's truth."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache

import torch
import torch.nn.functional as F

from grader.sandbox import arena, forget, zygote
from grader.truth import corpus as corpus_mod
from grader.truth.names import (  # noqa: F401 (re-exported: the grader names them as fixture's)
    EX1_ORDER,
    EX4_FORWARD_NAMES,
    EX4_GRADS,
    FORWARD_NAMES,
    PARAM_NAMES,
)

BN_EPS = 1e-5
TRAINING_STEPS = 4  # consecutive SGD steps checked by ex4.training on the lecture's sizes
HIDDEN_TRAINING_STEPS = 2  # ... and on a hidden geometry: two show sizes and state carried between steps
TRAINING_LR = 0.1


@dataclass(frozen=True)
class Geometry:
    """Sizes and seed of one fixture: batch n, context block_size, n_embd, n_hidden."""

    n: int = 32
    block_size: int = 3
    n_embd: int = 10
    n_hidden: int = 64
    seed: int = 2147483647
    vocab_size: int = 27

    def describe(self) -> str:
        """Return a one-line summary of the sizes."""
        return (
            f"n={self.n}, block_size={self.block_size}, n_embd={self.n_embd}, "
            f"n_hidden={self.n_hidden}, seed={self.seed}"
        )


# The lecture's geometry, public on purpose; the hidden second one is drawn by hidden_geometry().
PRIMARY = Geometry()
EX4_PRIMARY = replace(PRIMARY, n_hidden=200)

# Sizes the hidden geometry is drawn from: none equals a lecture size, so hard-coded 32, 3, 10, 64 or 200 break.
HIDDEN_SIZES = {
    "n": tuple(k for k in range(20, 49) if k != 32),
    "block_size": (2, 4, 5),
    "n_embd": tuple(k for k in range(6, 15) if k != 10),
    "n_hidden": tuple(k for k in range(40, 97, 4) if k != 64),
}
_RUN_KEY = secrets.token_bytes(32)  # drawn once per process; forked workers and sandboxes inherit it


@lru_cache(maxsize=64)  # bounded: a long-lived grading process draws four for every student it grades
def hidden_geometry(secret: str | None = None, submission: bytes = b"") -> Geometry:
    """Return the hidden second geometry (sizes and seed) that a course secret draws for a submission.

    Without a secret, the draw uses a key made at random once per process: every item of one run shares it, but
    the next run gets another geometry, so no fixed second geometry ships with the grader. The same secret
    always gives the same geometry for the same submission (a regrade agrees). `submission` (the digest of its
    files, see catalogue.Draw) makes each submission's geometry its own: what one submission reads
    of its hidden inputs (printed, or raised in a message) says nothing about the next one's, so answers for
    the hidden geometry cannot be worked out beforehand and written into the files.
    """
    key = _RUN_KEY if secret is None else secret.encode()
    label = b"backprop-ninja hidden geometry v1" + (b"|" + submission if submission else b"")
    for attempt in range(64):  # a draw that would hide a hard-coded reshape is drawn again
        digest = hmac.new(key, label + (b"#%d" % attempt if attempt else b""), hashlib.sha256).digest()
        sizes = {name: options[digest[k] % len(options)] for k, (name, options) in enumerate(HIDDEN_SIZES.items())}
        g = Geometry(**sizes, seed=int.from_bytes(digest[8:12], "big"))
        if not _same_counts(g):
            break
    return g


def new_run_key() -> None:
    """Draw this process's run key afresh: a warm process's worker (cli/warm.py) is a new run, not its fork's."""
    global _RUN_KEY
    _RUN_KEY = secrets.token_bytes(32)
    hidden_geometry.cache_clear()


@forget.on_fork_forget
def _forget_run_key() -> None:
    """A sandbox child holds neither the run's key nor the geometries it drew."""
    global _RUN_KEY
    _RUN_KEY = b""
    hidden_geometry.cache_clear()


def _same_counts(g: Geometry) -> bool:
    """Say whether a tensor of g has as many elements as its lecture twin: view(32, 3, 10) then still works.

    n=30, block_size=4, n_embd=8 gives emb 960 elements, as the lecture's: a hard-coded `view(32, 3, 10)`
    followed by a reshape gives back the right values, and the hidden geometry could not see the number.
    """
    counts = [lambda x, h: x.n * x.block_size * x.n_embd, lambda x, h: x.block_size * x.n_embd * h]
    counts.append(lambda x, h: x.n * h)
    return any(c(g, g.n_hidden) == c(p, h) for c in counts for p, h in ((PRIMARY, 64), (PRIMARY, 200)))


@dataclass(frozen=True)
class Variant:
    """A known-wrong backward pass, expressed as a change to the forward pass that autograd differentiates.

    cut: (source, consumer) edges whose gradient path is dropped (the source is detached there).
    bessel: the variance backpropagates with 1/n while the forward used 1/(n-1).
    bessel_inverted: the variance backpropagates with (n-1)/n**2, Ex3's closed form with its n/(n-1) written
    upside down as (n-1)/n.
    mean_n1: the batch mean backpropagates with 1/(n-1) while the forward used 1/n.
    tanh_preact: tanh backpropagates with 1 - hpreact**2 instead of 1 - h**2.
    no_eps: bnvar_inv backpropagates as bnvar**-0.5, without BatchNorm's eps.
    """

    cut: frozenset = frozenset()
    bessel: bool = False
    tanh_preact: bool = False
    no_eps: bool = False
    bessel_inverted: bool = False
    mean_n1: bool = False


EXACT = Variant()


def init_params(g: Geometry) -> dict[str, torch.Tensor]:
    """Initialise the parameters the lecture's way, every draw from one seeded generator."""
    gen = torch.Generator().manual_seed(g.seed)
    fan_in = g.n_embd * g.block_size
    return {
        "C": torch.randn((g.vocab_size, g.n_embd), generator=gen),  # (27, 10)
        "W1": torch.randn((fan_in, g.n_hidden), generator=gen) * (5 / 3) / fan_in**0.5,  # (30, 64)
        "b1": torch.randn(g.n_hidden, generator=gen) * 0.1,  # (64,)
        "W2": torch.randn((g.n_hidden, g.vocab_size), generator=gen) * 0.1,  # (64, 27)
        "b2": torch.randn(g.vocab_size, generator=gen) * 0.1,  # (27,)
        "bngain": torch.randn((1, g.n_hidden), generator=gen) * 0.1 + 1.0,  # (1, 64)
        "bnbias": torch.randn((1, g.n_hidden), generator=gen) * 0.1,  # (1, 64)
    }


class Examples:
    """Every (context, next character) pair of a word list, indexed without building the whole dataset."""

    def __init__(self, words, block_size: int):
        self.words = list(words)
        self.block_size = block_size
        self.starts = [0]
        for w in self.words:
            self.starts.append(self.starts[-1] + len(w) + 1)

    def __len__(self) -> int:
        return self.starts[-1]

    def get(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the contexts X (len, block_size) and targets Y (len,) of the given example indices."""
        X, Y = [], []
        for i in index.tolist():
            wi = bisect.bisect_right(self.starts, i) - 1
            pos = i - self.starts[wi]
            chars = [0] * self.block_size + [corpus_mod.STOI[c] for c in self.words[wi]] + [0]
            X.append(chars[pos : pos + self.block_size])
            Y.append(chars[pos + self.block_size])
        return torch.tensor(X, dtype=torch.int64), torch.tensor(Y, dtype=torch.int64)

    def all(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Return every example, as the lecture's build_dataset does."""
        return self.get(torch.arange(len(self)))


def sample_batch(examples: Examples, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw n examples with the lecture's torch.randint."""
    ix = torch.randint(0, len(examples), (n,), generator=gen)
    return examples.get(ix)


def _edge(x: torch.Tensor, src: str, dst: str, v: Variant) -> torch.Tensor:
    """Return x as seen by its consumer dst; detached when the variant cuts that path."""
    return x.detach() if (src, dst) in v.cut else x


def forward(p: dict[str, torch.Tensor], Xb: torch.Tensor, Yb: torch.Tensor, v: Variant = EXACT) -> dict:
    """Run the lecture's chunked forward pass; every intermediate keeps its gradient."""
    n = Xb.shape[0]
    t = {}
    # embedding and first linear layer
    t["emb"] = p["C"][Xb]  # (32, 3, 10)
    t["embcat"] = t["emb"].view(n, -1)  # (32, 30)
    t["hprebn"] = t["embcat"] @ p["W1"] + p["b1"]  # (32, 64)
    # BatchNorm, with Bessel's 1/(n-1) in the variance
    hprebn = t["hprebn"]
    t["bnmeani"] = 1 / n * _edge(hprebn, "hprebn", "bnmeani", v).sum(0, keepdim=True)  # (1, 64)
    if v.mean_n1:  # forward value 1/n, gradient 1/(n-1)
        m = _edge(hprebn, "hprebn", "bnmeani", v).sum(0, keepdim=True)
        t["bnmeani"] = m / (n - 1) + (m / n - m / (n - 1)).detach()
    t["bndiff"] = _edge(hprebn, "hprebn", "bndiff", v) - t["bnmeani"]  # (32, 64)
    t["bndiff2"] = _edge(t["bndiff"], "bndiff", "bndiff2", v) ** 2  # (32, 64)
    s = t["bndiff2"].sum(0, keepdim=True)  # (1, 64)
    if v.bessel:  # forward value 1/(n-1), gradient 1/n
        t["bnvar"] = s / n + (s / (n - 1) - s / n).detach()
    elif v.bessel_inverted:  # forward value 1/(n-1), gradient (n-1)/n**2
        t["bnvar"] = s * (n - 1) / n**2 + (s / (n - 1) - s * (n - 1) / n**2).detach()
    else:
        t["bnvar"] = 1 / (n - 1) * s  # (1, 64)
    t["bnvar_inv"] = (t["bnvar"] + BN_EPS) ** -0.5  # (1, 64)
    if v.no_eps:  # forward value with eps, local gradient without it
        t["bnvar_inv"] = t["bnvar"] ** -0.5 - (t["bnvar"] ** -0.5).detach() + t["bnvar_inv"].detach()
    t["bnraw"] = _edge(t["bndiff"], "bndiff", "bnraw", v) * t["bnvar_inv"]  # (32, 64)
    t["hpreact"] = p["bngain"] * t["bnraw"] + p["bnbias"]  # (32, 64)
    # non-linearity
    if v.tanh_preact:  # forward value tanh, local gradient 1 - hpreact**2
        x = t["hpreact"]
        t["h"] = (x - x**3 / 3) - (x - x**3 / 3).detach() + torch.tanh(x).detach()
    else:
        t["h"] = torch.tanh(t["hpreact"])  # (32, 64)
    # output layer and cross-entropy, one atomic step at a time
    t["logits"] = t["h"] @ p["W2"] + p["b2"]  # (32, 27)
    t["logit_maxes"] = _edge(t["logits"], "logits", "logit_maxes", v).max(1, keepdim=True).values  # (32, 1)
    t["norm_logits"] = t["logits"] - t["logit_maxes"]  # (32, 27)
    t["counts"] = t["norm_logits"].exp()  # (32, 27)
    t["counts_sum"] = _edge(t["counts"], "counts", "counts_sum", v).sum(1, keepdim=True)  # (32, 1)
    t["counts_sum_inv"] = t["counts_sum"] ** -1  # (32, 1)
    t["probs"] = _edge(t["counts"], "counts", "probs", v) * t["counts_sum_inv"]  # (32, 27)
    t["logprobs"] = t["probs"].log()  # (32, 27)
    t["loss"] = -t["logprobs"][range(n), Yb].mean()  # ()
    return t


def ex4_forward(p: dict[str, torch.Tensor], Xb: torch.Tensor, Yb: torch.Tensor, *, sum_var: bool = False) -> dict:
    """Run the lecture's compact Ex4 forward pass (the one trained without autograd).

    sum_var: take BatchNorm's variance as the Bessel-corrected sum of squares instead of var(0), which on CPU is
    about 7x slower for a (32, 200) batch; the training loop runs this every step. Equal to within float rounding.
    """
    n = Xb.shape[0]
    t = {}
    t["emb"] = p["C"][Xb]  # (32, 3, 10)
    t["embcat"] = t["emb"].view(n, -1)  # (32, 30)
    t["hprebn"] = t["embcat"] @ p["W1"] + p["b1"]  # (32, 200)
    t["bnmean"] = t["hprebn"].mean(0, keepdim=True)  # (1, 200)
    bndiff = t["hprebn"] - t["bnmean"]  # (32, 200)
    if sum_var:
        t["bnvar"] = bndiff.square().sum(0, keepdim=True) / (n - 1)  # (1, 200)
    else:
        t["bnvar"] = t["hprebn"].var(0, keepdim=True, unbiased=True)  # (1, 200)
    t["bnvar_inv"] = (t["bnvar"] + BN_EPS) ** -0.5  # (1, 200)
    t["bnraw"] = bndiff * t["bnvar_inv"]  # (32, 200)
    t["hpreact"] = p["bngain"] * t["bnraw"] + p["bnbias"]  # (32, 200)
    t["h"] = torch.tanh(t["hpreact"])  # (32, 200)
    t["logits"] = t["h"] @ p["W2"] + p["b2"]  # (32, 27)
    t["loss"] = F.cross_entropy(t["logits"], Yb)  # ()
    return t


def autograd_truth(p, Xb, Yb, v: Variant = EXACT, fwd=forward) -> tuple[dict, dict]:
    """Return (forward tensors, gradients named d<var>) with autograd on the given forward pass."""
    leaves = {k: t.detach().clone().requires_grad_() for k, t in p.items()}
    with torch.enable_grad():
        t = fwd(leaves, Xb, Yb, v) if fwd is forward else fwd(leaves, Xb, Yb)
        for x in t.values():
            if x.requires_grad:  # a variant's cut can leave a variable outside the graph
                x.retain_grad()
        t["loss"].backward()
    grads = {"d" + k: x.grad.detach() for k, x in {**t, **leaves}.items() if k != "loss" and x.grad is not None}
    return {k: x.detach() for k, x in t.items()}, grads


def rounding_noise(p, Xb, Yb, truth: dict, fwd=forward) -> dict[str, float]:
    """Return, per gradient, how far autograd's float32 truth is from the same gradient computed in float64.

    That distance is float32 rounding, not a mistake: an equally right answer rounded another way (a matmul for a
    row sum, float64 inside, an exact zero where autograd leaves ~1e-9) may be that far from the truth, and on a
    geometry where it exceeds allclose's atol such an answer must still pass (compare.compare's noise).
    """
    _, exact = autograd_truth({k: v.double() for k, v in p.items()}, Xb, Yb, fwd=fwd)
    return {k: float((t.double() - exact[k]).abs().max()) if t.numel() else 0.0 for k, t in truth.items()}


@dataclass(eq=False)
class Fixture:
    """One geometry's parameters, batch, forward tensors and true gradients."""

    geometry: Geometry
    corpus_digest: str
    Xb: torch.Tensor
    Yb: torch.Tensor
    params: dict[str, torch.Tensor]
    tensors: dict[str, torch.Tensor]  # forward pass, detached
    truth: dict[str, torch.Tensor]  # d<var> for every forward variable and parameter
    steps: list = field(default_factory=list)  # ex4.training: [(inputs, truth)] per SGD step
    variants: dict = field(default_factory=dict)  # Variant -> gradients of that known-wrong backward
    noise: dict = field(default_factory=dict)  # d<var> -> rounding_noise() of its truth (see rounding)
    ex4: bool = False  # built with ex4_forward

    @property
    def n(self) -> int:
        return self.Xb.shape[0]

    def inputs(self) -> dict:
        """Return every non-gradient value a student function may ask for."""
        return {**self.tensors, **self.params, "Xb": self.Xb, "Yb": self.Yb, "n": self.n}

    def checksum(self) -> str:
        """Return a checksum of the batch (its integers: the same on every CPU), to pin the fixed data.

        The loss is pinned apart, to a tolerance: its last printed digit depends on the CPU's kernels.
        """
        h = hashlib.sha256()
        h.update(self.Xb.numpy().tobytes())
        h.update(self.Yb.numpy().tobytes())
        return h.hexdigest()[:16]

    def rounding(self, grad: str) -> float:
        """Return rounding_noise() of one true gradient; a fixture built without it computes it on first use."""
        if not self.noise:
            fwd = ex4_forward if self.ex4 else forward
            self.noise.update(rounding_noise(self.params, self.Xb, self.Yb, self.truth, fwd=fwd))
        return self.noise[grad]

    def secrets(self):
        """Yield every tensor a sandboxed child must not be able to read."""
        yield from self.truth.values()
        for inputs, truth in self.steps:
            yield from (x for x in inputs.values() if isinstance(x, torch.Tensor))
            yield from truth.values()
        for grads in self.variants.values():
            yield from grads.values()

    def variant(self, v: Variant) -> dict[str, torch.Tensor]:
        """Return the gradients a known-wrong backward pass would give on this fixture (cached)."""
        if v not in self.variants:
            self.variants[v] = arena.seal_all(autograd_truth(self.params, self.Xb, self.Yb, v)[1])
        return self.variants[v]


class Built(dict):
    """Every fixture built in this process, by (geometry, data, ex4): each is built once and kept."""

    @contextlib.contextmanager
    def emptied(self):
        """Start from no fixture built, and put back what was built before on leaving."""
        saved = dict(self)
        self.clear()
        try:
            yield self
        finally:
            self.clear()
            self.update(saved)


BUILT = Built()


@cache
def _examples(data: str | None, block_size: int) -> Examples:
    train, _, _ = corpus_mod.load(data).split()
    return Examples(train, block_size)


def _ex4_inputs(params, Xb, Yb):
    t, grads = autograd_truth(params, Xb, Yb, fwd=ex4_forward)
    inputs = {**t, **params, "Xb": Xb, "Yb": Yb, "n": Xb.shape[0]}
    return t, inputs, grads


def build(g: Geometry, data: str | None = None, ex4: bool = False, seal: bool = True) -> Fixture:
    """Build (once per process) the fixture of one geometry; ex4=True uses the compact Ex4 forward.

    seal=False leaves the true gradients in ordinary memory: for a process that only sends them on (the truth
    server, a helper) and never forks a sandbox; the receiving process puts them in its arena. A process whose
    sandboxes a zygote forks (a batch's long-lived grading process) never seals either.
    """
    forks_here = zygote.current() is None  # a zygote's client forks no sandbox
    keep = arena.seal_all if seal and forks_here else dict
    key = (g, data, ex4)
    if key in BUILT:
        return BUILT[key]
    corpus = corpus_mod.load(data)
    examples = _examples(data, g.block_size)
    params = init_params(g)
    batch_gen = torch.Generator().manual_seed(g.seed + 1)
    Xb, Yb = sample_batch(examples, g.n, batch_gen)  # (32, 3), (32,)
    if ex4:
        tensors, _, truth = _ex4_inputs(params, Xb, Yb)
        fx = Fixture(g, corpus.digest, Xb, Yb, params, tensors, keep(truth), ex4=True)  # Ex4 needs no noise
        # ex4.training: consecutive SGD steps driven by autograd; the student is fed each step's forward
        p = {k: v.clone() for k, v in params.items()}
        for _ in range(TRAINING_STEPS if g == EX4_PRIMARY else HIDDEN_TRAINING_STEPS):
            xs, ys = sample_batch(examples, g.n, batch_gen)
            _, inputs, grads = _ex4_inputs(p, xs, ys)
            fx.steps.append((keep(inputs), keep(grads)))
            p = {k: p[k] - TRAINING_LR * grads["d" + k] for k in p}
    else:
        tensors, truth = autograd_truth(params, Xb, Yb)
        fx = Fixture(g, corpus.digest, Xb, Yb, params, tensors, keep(truth))
        if forks_here:  # now, not after a sandbox may be forked from here; a zygote's client waits for a need
            fx.noise = rounding_noise(params, Xb, Yb, truth)
    BUILT[key] = fx
    return fx


def built_fixtures() -> list[Fixture]:
    """Return every fixture this process has built."""
    return list(BUILT.values())
