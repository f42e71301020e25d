"""Pictures of gradients for `--plot`; matplotlib is imported only when a picture is drawn."""

from __future__ import annotations

import math

import torch

from grader.truth import corpus as corpus_mod

MISSING = "plots need matplotlib: pip install 'backprop-ninja-grader[plot]'"


def figure(**kwargs):
    """Return a new matplotlib Figure (no pyplot, no GUI); raise RuntimeError if matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError(MISSING) from None
    return Figure(**kwargs)


def _matrix(t: torch.Tensor) -> torch.Tensor:
    """Return t as a 2-D float tensor: a scalar as (1, 1), 1-D as (1, k), N-D with leading dims flattened."""
    t = t.detach().to(torch.float64).cpu()
    if t.dim() == 0:
        return t.view(1, 1)
    if t.dim() == 1:
        return t.view(1, -1)
    return t.reshape(-1, t.shape[-1])


def plot_dlogits(student: torch.Tensor, truth: torch.Tensor, path) -> str:
    """Draw the lecture's gray picture of dlogits, the student's beside autograd's; return the path."""
    fig = figure(figsize=(11, 5.5))
    axes = fig.subplots(1, 2)
    true = _matrix(truth)
    lo, hi = true.min().item(), true.max().item()  # one gray scale for both, so a wrong scale shows
    for ax, t, title in ((axes[0], student, "your dlogits"), (axes[1], truth, "autograd's dlogits")):
        im = ax.imshow(_matrix(t).numpy(), cmap="gray", vmin=lo, vmax=hi, aspect="auto", interpolation="nearest")
        ax.set_title(f"{title} {tuple(t.shape)}")
        ax.set_xlabel("vocabulary index (0 = '.')")
        ax.set_ylabel("example in the batch")
        fig.colorbar(im, ax=ax)
    if student.shape == truth.shape:
        diff = (_matrix(student) - true).abs().max().item()
        fig.suptitle(f"dlogits, one gray scale for both: max |yours - autograd| = {diff:.3g}")
    else:
        fig.suptitle(f"dlogits: your shape {tuple(student.shape)} differs from {tuple(truth.shape)}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return str(path)


def _axes_labels(ax, t: torch.Tensor, m: torch.Tensor) -> None:
    """Label the rows of a tensor's 2-D picture: the vocabulary for (27, k), the flattened dims for N-D."""
    if m.shape[0] == 1:
        ax.set_yticks([])
    elif t.dim() > 2:
        ax.set_ylabel(" x ".join(map(str, t.shape[:-1])) + " flattened", fontsize=8)
    if t.dim() >= 2 and m.shape[0] == len(corpus_mod.VOCAB):
        ax.set_yticks(range(len(corpus_mod.VOCAB)))
        ax.set_yticklabels(list(corpus_mod.VOCAB), fontsize=6)


def _vector_like(t: torch.Tensor) -> bool:
    """Return whether a tensor has at most one dimension longer than 1: (64,), (1, 64), (64, 1)."""
    return t.dim() >= 1 and sum(k > 1 for k in t.shape) <= 1


def _draw_bars(ax, item_id: str, student: torch.Tensor, truth: torch.Tensor) -> None:
    """Draw a 1-D gradient as bars: |yours - autograd| per entry, or your values beside autograd's."""
    s = student.detach().to(torch.float64).flatten()  # (k,)
    if student.shape == truth.shape:
        d = (s - truth.detach().to(torch.float64).flatten()).abs()  # (k,)
        ax.bar(range(len(d)), d.tolist(), color="tab:purple", width=0.9)
        ax.set_title(f"{item_id}: |yours - autograd| per entry, max {d.max().item():.3g}", fontsize=9)
        ax.set_ylabel("|difference|", fontsize=8)
    else:
        t = truth.detach().to(torch.float64).flatten()  # (k,)
        ax.bar([i - 0.2 for i in range(len(s))], s.tolist(), width=0.4, color="tab:red", label="yours")
        if len(t) == len(s):
            ax.bar([i + 0.2 for i in range(len(t))], t.tolist(), width=0.4, color="tab:gray", label="autograd")
        ax.legend(fontsize=7)
        ax.set_title(
            f"{item_id}: your shape {tuple(student.shape)} != {tuple(truth.shape)}", fontsize=9, color="tab:red"
        )
    ax.set_xlabel("index", fontsize=8)


def differences_figure(items):
    """Return a Figure with one panel per (item_id, student, truth): a heat map, or bars for a 1-D gradient."""
    items = list(items)
    if not items:
        raise ValueError("plot_differences needs at least one item")
    cols = min(3, len(items))
    rows = math.ceil(len(items) / cols)
    fig = figure(figsize=(5 * cols, 3.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (item_id, student, truth) in zip(axes, items, strict=False):
        if _vector_like(student) and (student.shape == truth.shape or _vector_like(truth)):
            _draw_bars(ax, item_id, student, truth)
            continue
        if student.shape == truth.shape:
            m = (_matrix(student) - _matrix(truth)).abs()  # |student - truth|, 2-D
            top = m.max().item()
            exact = " (exact)" if top == 0 else ""
            vmax = top if top > 0 and math.isfinite(top) else 1.0  # exact: all dark
            im = ax.imshow(m.numpy(), cmap="viridis", vmin=0, vmax=vmax, aspect="auto", interpolation="nearest")
            ax.set_title(f"{item_id}: |yours - autograd|, max {top:.3g}{exact}", fontsize=9)
        else:
            m = _matrix(student)
            im = ax.imshow(m.numpy(), cmap="gray", aspect="auto", interpolation="nearest")
            ax.set_title(
                f"{item_id}: yours alone, shape {tuple(student.shape)} != {tuple(truth.shape)}",
                fontsize=9,
                color="tab:red",
            )
        fig.colorbar(im, ax=ax)
        _axes_labels(ax, student, m)
    for ax in axes[len(items) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plot_differences(items, path) -> str:
    """Draw one panel of |student - truth| per (item_id, student, truth); return the path."""
    differences_figure(items).savefig(path, dpi=100)
    return str(path)


def _chunked(losses, chunk: int) -> list[float]:
    """Return the mean log10 loss over consecutive chunks of steps, as the lecture plots it."""
    log10 = torch.tensor(losses, dtype=torch.float64).clamp_min(1e-12).log10()  # (steps,)
    usable = len(log10) // chunk * chunk
    return log10[:usable].view(-1, chunk).mean(1).tolist() if usable else []


def loss_curves_figure(student, reference, *, train=None, val=None):
    """Return a Figure of the student's loss curve beside autograd's reference curve (same seed and steps)."""
    chunk = min(1000, max(1, max(len(student), len(reference)) // 50))
    fig = figure(figsize=(8, 4.5))
    ax = fig.subplots()
    # yours wide underneath, autograd's dashed on top: where they agree, both stay visible
    for losses, label, style in (
        (student, "your backward", {"lw": 3.0, "color": "tab:orange", "alpha": 0.8}),
        (reference, "autograd's loss.backward()", {"lw": 1.2, "color": "black", "ls": "--"}),
    ):
        curve = _chunked(losses, chunk)
        ax.plot([(i + 1) * chunk for i in range(len(curve))], curve, label=label, **style)
    ax.set_xlabel("step")
    ax.set_ylabel(f"log10 loss (mean of {chunk} steps)")
    result = f": train {train:.4f}, val {val:.4f}" if train is not None and val is not None else ""
    ax.set_title(f"Ex4 trained with your backward{result}; autograd on the same batches for reference", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_loss_curves(student, reference, path, *, train=None, val=None) -> str:
    """Write the student's loss curve beside autograd's to a PNG; return its path."""
    loss_curves_figure(student, reference, train=train, val=val).savefig(path, dpi=100)
    return str(path)
