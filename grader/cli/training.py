"""`grade ex4 --full`: train the lecture's network in the sandbox with the student's backward, judge it here."""

from __future__ import annotations

from pathlib import Path

import click
import torch

from grader.grading.runner import read_sources
from grader.sandbox import Limits, Worker, jail, wire
from grader.sandbox.wire import Returned, WireError
from grader.show import table as report
from grader.submissions.sources import Submission
from grader.training import served  # noqa: F401  (registers the child's `train` request before any fork)
from grader.training import sgd as training
from grader.truth import corpus as corpus_mod
from grader.truth import fixture

TRAIN_REPLY = {
    "ok": bool,
    "params": wire.Map(wire.VALUE),
    "losses": wire.VALUE,
    "diverged_at": wire.Opt(int),
    "seconds": float,
    "error": wire.ERROR,
    "autograd": [str],
}


class TrainingFailed(click.ClickException):
    """The student's backward could not train the network."""


def run_full(submission, *, data: str | None, steps: int, quiet: bool, plot: str | None) -> dict:
    """Train with the submission's ex4.backward (a folder, or what intake read) and return the `training` object."""
    corpus = corpus_mod.load(data)
    training.dataset(corpus, "train", fixture.EX4_PRIMARY.block_size)  # built here: the sandbox has no files
    if isinstance(submission, Submission):
        sources, where = submission.sources, submission.name
    else:
        sources, where = read_sources(Path(submission), ["ex4"]), f"{submission}/ex4.py"
    if "ex4" not in sources:
        raise TrainingFailed(f"--full needs Ex4's backward, and there is none in {where}")
    timeout = 120 + steps / 300  # a slow backward runs ~700 steps/s; a fast one ~3000
    limits = Limits(timeout=timeout, cpu_seconds=int(timeout) + 60)
    bar = None
    if not quiet:
        bar = click.progressbar(
            length=steps,
            label="training",
            file=click.get_text_stream("stderr"),
            show_eta=True,
            item_show_func=lambda loss: loss,
        )
        bar.__enter__()
    last = [0]

    def on_progress(header):
        if bar is not None:
            step = int(header.get("progress", 0))
            bar.update(step - last[0], f"loss {float(header.get('loss', float('nan'))):.4f}")
            last[0] = step

    with jail.held(), Worker(limits) as worker:
        loaded = worker.ask({"op": "load", "path": sources["ex4"].path, "text": sources["ex4"].text})
        if not loaded.ok or not loaded.header.get("ok"):
            _close(bar)
            raise TrainingFailed(f"ex4.py could not be loaded: {_why(loaded)}")
        reply = worker.ask({"op": "train", "steps": steps, "data": data}, timeout=timeout, on_progress=on_progress)
    if bar is not None:
        bar.update(steps - last[0])
    _close(bar)
    if not reply.ok:
        raise TrainingFailed(f"training stopped: {reply.failure}: {reply.reason}")
    header = reply.header
    if not header.get("ok"):
        raise TrainingFailed(f"your backward failed during training: {_why(reply)}")
    try:
        wire.check(header, TRAIN_REPLY, "training reply")
        dec = wire.Decoder(reply.blob)
        params = {k: dec.value(v) for k, v in header["params"].items()}
        losses = dec.value(header["losses"])
    except (WireError, KeyError) as exc:
        raise TrainingFailed(f"the sandbox sent an unreadable result: {exc}") from None
    expected = fixture.init_params(fixture.EX4_PRIMARY)
    if set(params) != set(expected) or not all(
        isinstance(p, Returned) and p.tensor.shape == expected[k].shape for k, p in params.items()
    ):
        raise TrainingFailed("the sandbox returned parameters of the wrong shape")
    params = {k: p.tensor for k, p in params.items()}
    losses_list = losses.tensor.tolist() if isinstance(losses, Returned) else []
    with torch.no_grad():
        run = training.finish(params, losses_list, header.get("diverged_at"), float(header.get("seconds", 0)), corpus)
    if not quiet:
        report.note(
            f"trained {run.steps} steps in {run.seconds:.0f} s: train loss {run.train_loss:.4f}, "
            f"val loss {run.val_loss:.4f}\nsamples: {', '.join(run.samples)}"
        )
    if plot:
        draw_curve(run, corpus, steps, plot)
    return run.to_dict()


def autograd_backward(Xb, Yb, C, W1, b1, W2, b2, bngain, bnbias) -> dict:
    """Return autograd's Ex4 gradients (loss.backward() on the compact forward): the reference curve's backward."""
    params = {"C": C, "W1": W1, "b1": b1, "W2": W2, "b2": b2, "bngain": bngain, "bnbias": bnbias}
    _, grads = fixture.autograd_truth(params, Xb, Yb, fwd=fixture.ex4_forward)
    return {g: grads[g] for g in fixture.EX4_GRADS}


def reference_losses(corpus, steps: int) -> list[float]:
    """Return the per-step losses of training with autograd's gradients, same seed, batches and steps."""
    _, losses, _, _ = training.sgd(autograd_backward, corpus, steps)
    return losses


def draw_curve(run: training.TrainingRun, corpus, steps: int, path) -> None:
    """Draw the student's loss curve beside autograd's on the same seed and steps; say where it went."""
    from grader.show import plots

    report.note(f"--curve: training once more with autograd's loss.backward() ({steps} steps) for the reference")
    reference = reference_losses(corpus, steps)
    try:
        run.plot = plots.plot_loss_curves(run.losses, reference, path, train=run.train_loss, val=run.val_loss)
    except RuntimeError as exc:  # matplotlib is missing: plots.MISSING says how to install it
        report.note(f"--curve: no picture written; {exc}")
        return
    report.note(f"wrote {path}: your loss curve beside autograd's")


def _close(bar):
    if bar is not None:
        bar.__exit__(None, None, None)


def _why(reply) -> str:
    if not reply.ok:
        return f"{reply.failure}: {reply.reason}"
    err = reply.header.get("error") or {}
    where = f" at line {err['line']}: `{err.get('code')}`" if err.get("line") else ""
    return f"{err.get('type')}: {err.get('message')}{where}"
