"""Exercise 4 for real: train the lecture's MLP with a hand-written backward pass, no autograd anywhere."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.nn.functional as F

from grader.truth import corpus as corpus_mod
from grader.truth import fixture

LECTURE_STEPS = 200_000
LR, LR_LATE = 0.1, 0.01  # the learning rate drops at steps // 2 (step 100_000 of the lecture's 200_000)
BATCH_SEED = 2147483647  # the lecture's generator seed, here for the minibatch draws
SAMPLE_SEED = 2147483647 + 10  # the lecture's sampling generator
SPLITS = ("train", "val", "test")
MAX_NAME_LEN = 50  # a broken model may never emit '.'

# What a right backward reaches in the lecture's 200,000 steps: (train, val) loss after BatchNorm's calibration.
LECTURE_LOSSES = (2.07, 2.11)  # on the lecture's names.txt (the reference backward here: 2.0705, 2.1094)
DEFAULT_CORPUS_LOSSES = (1.69, 2.00)  # on the default census names (the reference backward here: 1.6860, 1.9978)


def expected_losses(corpus: corpus_mod.Corpus) -> tuple[float, float] | None:
    """Return the (train, val) loss a right backward reaches on corpus in the lecture's steps, where known."""
    if corpus.is_lecture:
        return LECTURE_LOSSES
    if corpus.is_default:
        return DEFAULT_CORPUS_LOSSES
    return None


def corpus_note(corpus: corpus_mod.Corpus, steps: int) -> str:
    """Say which corpus a training run used and what a right backward reaches on it, beside the lecture's numbers.

    The lecture's train 2.07 / val 2.11 are for its names.txt; the default corpus, about six times smaller, gives
    lower train and val losses (1.69 / 2.00), and a student comparing the two must not think their backward wrong.
    """
    lecture = f"train {LECTURE_LOSSES[0]:.2f} / val {LECTURE_LOSSES[1]:.2f}"
    expected = expected_losses(corpus)
    when = f"in the lecture's {LECTURE_STEPS:,} steps"
    if steps < LECTURE_STEPS:
        when += f" (you trained {steps:,}: expect higher losses)"
    said = f"corpus: {corpus.describe()}."
    if corpus.is_lecture:
        return f"{said} A right backward reaches about {lecture} on it {when}, as in the lecture."
    if corpus.is_default:
        ours = f"train {expected[0]:.2f} / val {expected[1]:.2f}"
        return (
            f"{said} A right backward reaches about {ours} on it {when}. The lecture's {lecture} are for its "
            f"names.txt (32,033 names): to compare with those, train on it with --data names.txt."
        )
    return (
        f"{said} The lecture's {lecture} are for its names.txt; on another corpus a right backward reaches other "
        f"numbers (on the default census names, train {DEFAULT_CORPUS_LOSSES[0]:.2f} / val "
        f"{DEFAULT_CORPUS_LOSSES[1]:.2f} {when})."
    )


@dataclass
class TrainingRun:
    """The outcome of one training run: losses, samples and the trained parameters."""

    steps: int  # steps actually run (fewer than asked when the loss diverged)
    train_loss: float
    val_loss: float
    samples: list[str]
    seconds: float  # wall time of the training loop alone
    params: dict[str, torch.Tensor] = field(repr=False)
    bn_stats: dict[str, torch.Tensor] = field(repr=False)  # bnmean, bnvar calibrated on the training set
    losses: list[float] = field(repr=False)  # the minibatch loss of every step
    diverged_at: int | None = None  # first step whose loss was not finite
    plot: str | None = None
    corpus: str = ""  # which corpus it trained on (Corpus.describe())
    expected: tuple[float, float] | None = None  # (train, val) a right backward reaches there in 200,000 steps

    def to_dict(self) -> dict:
        """Return the JSON-friendly summary (the per-step losses stay out)."""
        return {
            "corpus": self.corpus,
            "expected": None
            if self.expected is None
            else {"train": self.expected[0], "val": self.expected[1], "steps": LECTURE_STEPS},
            "steps": self.steps,
            "train_loss": _finite(self.train_loss),
            "val_loss": _finite(self.val_loss),
            "samples": list(self.samples),
            "plot": self.plot,
            "seconds": round(self.seconds, 3),
            "diverged_at": self.diverged_at,
        }


def _finite(x: float) -> float | None:
    """Return x, or None when it is NaN or infinite (JSON has neither)."""
    return x if math.isfinite(x) else None


def bind(fn: Callable, available: Mapping) -> dict:
    """Return the keyword arguments of fn, each taken by parameter name from available."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of {_name(fn)}: {exc}") from None
    kwargs = {}
    stars = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if sig.parameters and all(p.kind in stars for p in sig.parameters.values()):  # a decorator without wraps
        p = next(iter(sig.parameters.values()))
        star = "*" if p.kind is p.VAR_POSITIONAL else "**"
        raise TypeError(f"{_name(fn)}(): {star}{p.name} cannot be bound: name each input you need as a parameter")
    for p in sig.parameters.values():
        if p.kind in stars:  # beside named parameters, given nothing
            continue
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{_name(fn)}(): parameter {p.name!r} is positional-only; make it a named parameter")
        if p.name in available:
            kwargs[p.name] = available[p.name]
        elif p.default is p.empty:
            raise TypeError(f"{_name(fn)}(): unknown parameter {p.name!r}; available: {', '.join(available)}")
    return kwargs


def _name(fn) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def check_grads(grads, params: Mapping[str, torch.Tensor], step: int) -> None:
    """Raise ValueError unless grads holds a float32 tensor of each parameter's shape under 'd<param>'."""
    where = f"at step {step}"
    if not isinstance(grads, Mapping):
        raise ValueError(
            f"backward must return a dict of {', '.join(fixture.EX4_GRADS)}; it returned {type(grads).__name__} {where}"
        )
    missing = [k for k in fixture.EX4_GRADS if k not in grads]
    if missing:
        has = ", ".join(map(str, grads)) or "nothing"
        raise ValueError(f"backward's dict lacks {', '.join(missing)} {where} (it has: {has})")
    for key in fixture.EX4_GRADS:
        g, p = grads[key], params[key[1:]]
        if not isinstance(g, torch.Tensor):
            raise ValueError(f"backward returned {key} as {type(g).__name__}, not a tensor, {where}")
        if g.dtype != p.dtype:
            raise ValueError(
                f"backward returned {key} with dtype {_dtype(g.dtype)} {where}; expected {_dtype(p.dtype)}"
            )
        if g.shape != p.shape:
            raise ValueError(
                f"backward returned {key} with shape {tuple(g.shape)} {where}; "
                f"expected {tuple(p.shape)}, the shape of {key[1:]}"
            )


def _dtype(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def as_corpus(corpus) -> corpus_mod.Corpus:
    """Return corpus itself, or the corpus at that path (None: the default census names)."""
    return corpus if isinstance(corpus, corpus_mod.Corpus) else corpus_mod.load(corpus)


@lru_cache(maxsize=8)
def dataset(corpus: corpus_mod.Corpus, split: str, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return every (context, target) example of one split, as the lecture's build_dataset does."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    words = corpus.split()[SPLITS.index(split)]
    return fixture.Examples(words, block_size).all()  # (N, block_size), (N,)


def _block_size(params: Mapping[str, torch.Tensor]) -> int:
    return params["W1"].shape[0] // params["C"].shape[1]


def _hpreact(params, bn_stats, X: torch.Tensor) -> torch.Tensor:
    """Return the BatchNorm output of contexts X using the calibrated statistics."""
    emb = params["C"][X]  # (N, 3, 10)
    hprebn = emb.view(emb.shape[0], -1) @ params["W1"] + params["b1"]  # (N, 200)
    bnraw = (hprebn - bn_stats["bnmean"]) * (bn_stats["bnvar"] + fixture.BN_EPS) ** -0.5  # (N, 200)
    return params["bngain"] * bnraw + params["bnbias"]  # (N, 200)


def _logits(params, bn_stats, X: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(_hpreact(params, bn_stats, X))  # (N, 200)
    return h @ params["W2"] + params["b2"]  # (N, 27)


@torch.no_grad()
def calibrate(params: Mapping[str, torch.Tensor], corpus) -> dict[str, torch.Tensor]:
    """Return BatchNorm's mean and variance over every training example, as the lecture does."""
    X, _ = dataset(as_corpus(corpus), "train", _block_size(params))
    emb = params["C"][X]  # (N, 3, 10)
    hprebn = emb.view(emb.shape[0], -1) @ params["W1"] + params["b1"]  # (N, 200)
    return {
        "bnmean": hprebn.mean(0, keepdim=True),  # (1, 200)
        "bnvar": hprebn.var(0, keepdim=True, unbiased=True),  # (1, 200)
    }


@torch.no_grad()
def evaluate(params: Mapping, bn_stats: Mapping, corpus, split: str) -> float:
    """Return the mean cross-entropy loss on a split ('train', 'val' or 'test') with calibrated BatchNorm."""
    X, Y = dataset(as_corpus(corpus), split, _block_size(params))
    return F.cross_entropy(_logits(params, bn_stats, X), Y).item()


@contextmanager
def threads_set(threads: int | None):
    """Run the block with torch's intra-op threads set to threads (None: unchanged), then restore them."""
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@torch.no_grad()
def sample(params: Mapping, bn_stats: Mapping, n: int = 20, seed: int = SAMPLE_SEED) -> list[str]:
    """Sample n names from the model the lecture's way (without the closing '.')."""
    with threads_set(1):  # one name at a time: (1, 30) matrices
        return _sample(params, bn_stats, n, seed)


def _sample(params, bn_stats, n: int, seed: int) -> list[str]:
    """Sample n names, one character at a time."""
    g = torch.Generator().manual_seed(seed)
    block_size = _block_size(params)
    names = []
    for _ in range(n):
        out, context = [], [0] * block_size
        while len(out) < MAX_NAME_LEN:
            logits = _logits(params, bn_stats, torch.tensor([context]))  # (1, 27)
            probs = F.softmax(logits, dim=1)  # (1, 27)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            if ix == 0:
                break
            context = context[1:] + [ix]
            out.append(corpus_mod.ITOS[ix])
        names.append("".join(out))
    return names


def train(
    backward: Callable,
    corpus=None,
    *,
    steps: int = LECTURE_STEPS,
    geometry: fixture.Geometry = fixture.EX4_PRIMARY,
    progress: Callable[[int, float], None] | None = None,
    progress_every: int = 1000,
    seed: int = BATCH_SEED,
    threads: int | None = 1,
) -> TrainingRun:
    """Train the lecture's MLP with SGD driven by backward(**inputs), then calibrate, evaluate and sample.

    corpus: a Corpus, a path to a names file, or None for the default census names.
    backward: called once per step with the inputs its parameters name (forward tensors, parameters, Xb, Yb,
    n); it must return {'dC', 'dW1', 'db1', 'dW2', 'db2', 'dbngain', 'dbnbias'}. A step whose loss is not
    finite ends the run early. progress(step, loss) is called every progress_every steps, from step 0.
    threads: torch's intra-op threads in the SGD loop (restored after it; 1 is fastest); None leaves them.
    """
    return _train(backward, as_corpus(corpus), steps, geometry, progress, progress_every, seed, threads)


def _train(backward, corpus, steps, geometry, progress, progress_every, seed, threads) -> TrainingRun:
    """Run the SGD loop, then calibrate BatchNorm, evaluate and sample."""
    params, losses, diverged_at, seconds = sgd(
        backward, corpus, steps, geometry, progress, progress_every, seed, threads
    )
    return finish(params, losses, diverged_at, seconds, corpus)


def sgd(
    backward,
    corpus,
    steps,
    geometry=fixture.EX4_PRIMARY,
    progress=None,
    progress_every=1000,
    seed=BATCH_SEED,
    threads=1,
):
    """Run the SGD loop driven by backward; return (params, losses, diverged_at, seconds)."""
    return Loop(backward, corpus, steps, geometry, progress, progress_every, seed, threads).run().result()


class Loop:
    """The SGD loop driven by a hand-written backward, run in slices: run(until) goes on where the last one stopped.

    `grade ex4 --full` times the first few steps of the student's backward (one slice), then gives the rest a
    deadline scaled from that pace (the next slice), without training anything twice.
    """

    def __init__(
        self,
        backward,
        corpus,
        steps,
        geometry=fixture.EX4_PRIMARY,
        progress=None,
        progress_every=1000,
        seed=BATCH_SEED,
        threads=1,
    ):
        self.backward, self.steps, self.threads = backward, steps, threads
        self.progress, self.progress_every = progress, progress_every
        self.Xtr, self.Ytr = dataset(as_corpus(corpus), "train", geometry.block_size)  # (N, 3), (N,)
        self.params = fixture.init_params(geometry)
        self.gen = torch.Generator().manual_seed(seed)
        self.n = geometry.n
        self.losses: list[float] = []
        self.diverged_at: int | None = None
        self.seconds = 0.0  # wall time of the slices run so far
        self._names: list[str] | None = None

    @property
    def done(self) -> bool:
        """Whether every step has run, or the loss diverged."""
        return self.diverged_at is not None or len(self.losses) >= self.steps

    def run(self, until: int | None = None) -> Loop:
        """Run the steps from where the last slice stopped up to step `until` (default: the last)."""
        until = self.steps if until is None else min(until, self.steps)
        params, n, switch = self.params, self.n, self.steps // 2
        start = time.perf_counter()
        try:
            with torch.no_grad(), threads_set(self.threads):
                for step in range(len(self.losses), until):
                    if self.diverged_at is not None:
                        break
                    # the same draw as fixture.sample_batch, on the dataset built once
                    ix = torch.randint(0, self.Xtr.shape[0], (n,), generator=self.gen)  # (32,)
                    Xb, Yb = self.Xtr[ix], self.Ytr[ix]  # (32, 3), (32,)
                    t = fixture.ex4_forward(params, Xb, Yb, sum_var=True)
                    loss = t["loss"].item()
                    self.losses.append(loss)
                    if self.progress is not None and step % self.progress_every == 0:
                        self.progress(step, loss)
                    if not math.isfinite(loss):
                        self.diverged_at = step
                        break
                    available = {**t, **params, "Xb": Xb, "Yb": Yb, "n": n}
                    if self._names is None:  # read the signature once
                        self._names = list(bind(self.backward, available))
                    grads = self.backward(**{k: available[k] for k in self._names})
                    check_grads(grads, params, step)
                    lr = LR if step < switch else LR_LATE
                    for k, p in params.items():
                        p.add_(grads["d" + k], alpha=-lr)
        finally:
            self.seconds += time.perf_counter() - start
        return self

    def result(self) -> tuple[dict[str, torch.Tensor], list[float], int | None, float]:
        """Return (params, losses, diverged_at, seconds)."""
        return self.params, self.losses, self.diverged_at, self.seconds


def autograd_losses(corpus, steps: int, geometry=fixture.EX4_PRIMARY, seed: int = BATCH_SEED) -> list[float]:
    """Return the per-step losses of the same training with autograd's loss.backward(): the --curve reference.

    The same data, initialisation, minibatch draws and learning rates as sgd(), the lecture's plain loop (no
    gradient kept but the parameters'), on one thread.
    """
    Xtr, Ytr = dataset(as_corpus(corpus), "train", geometry.block_size)  # (N, 3), (N,)
    params = {k: p.requires_grad_() for k, p in fixture.init_params(geometry).items()}
    gen = torch.Generator().manual_seed(seed)
    switch = steps // 2
    losses: list[float] = []
    with torch.enable_grad(), threads_set(1):
        for step in range(steps):
            ix = torch.randint(0, Xtr.shape[0], (geometry.n,), generator=gen)  # (32,)
            loss = fixture.ex4_forward(params, Xtr[ix], Ytr[ix], sum_var=True)["loss"]
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                break
            for p in params.values():
                p.grad = None
            loss.backward()
            lr = LR if step < switch else LR_LATE
            with torch.no_grad():
                for p in params.values():
                    p.add_(p.grad, alpha=-lr)
    return losses


def finish(params, losses, diverged_at, seconds, corpus) -> TrainingRun:
    """Calibrate BatchNorm over the training set, evaluate train and val loss, and sample names."""
    corpus = as_corpus(corpus)
    bn_stats = calibrate(params, corpus)
    return TrainingRun(
        steps=len(losses),
        train_loss=evaluate(params, bn_stats, corpus, "train"),
        val_loss=evaluate(params, bn_stats, corpus, "val"),
        samples=[] if diverged_at is not None else sample(params, bn_stats),
        seconds=seconds,
        params=params,
        bn_stats=bn_stats,
        losses=losses,
        diverged_at=diverged_at,
        corpus=corpus.describe(),
        expected=expected_losses(corpus),
    )


def plot_losses(run: TrainingRun, path) -> str:
    """Write the lecture's loss curve (mean log10 loss over chunks of steps) to a PNG; return its path."""
    from grader.show.plots import figure

    log10 = torch.tensor(run.losses, dtype=torch.float64).log10()  # (steps,)
    chunk = min(1000, max(1, len(log10) // 50))
    usable = len(log10) // chunk * chunk
    curve = log10[:usable].view(-1, chunk).mean(1)  # (steps // chunk,)
    fig = figure(figsize=(8, 4.5))
    ax = fig.subplots()
    ax.plot([(i + 1) * chunk for i in range(len(curve))], curve.tolist())
    ax.set_xlabel("step")
    ax.set_ylabel(f"log10 loss (mean of {chunk} steps)")
    ax.set_title(f"Ex4 trained with your backward: train {run.train_loss:.4f}, val {run.val_loss:.4f}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    run.plot = str(path)
    return run.plot
