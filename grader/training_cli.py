"""`grade ex4 --full`: train the lecture's network in the sandbox with the student's backward, judge it here."""

from __future__ import annotations

from pathlib import Path

import click
import torch

from grader import corpus as corpus_mod
from grader import fixture, report, training
from grader.runner import read_sources
from grader.sandbox import Limits, Worker
from grader.wire import Returned, WireError, decode_value


class TrainingFailed(click.ClickException):
    """The student's backward could not train the network."""


def run_full(submission: Path, *, data: str | None, steps: int, quiet: bool, plot: str | None) -> dict:
    """Train with the submission's ex4.backward and return the JSON `training` object."""
    corpus = corpus_mod.load(data)
    training.dataset(corpus, "train", fixture.EX4_PRIMARY.block_size)  # built here: the sandbox has no files
    sources = read_sources(submission, ["ex4"])
    if "ex4" not in sources:
        raise TrainingFailed(f"--full needs {submission}/ex4.py")
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

    with Worker({ex: (s.path, s.text) for ex, s in sources.items()}, limits) as worker:
        loaded = worker.ask({"op": "load", "exercise": "ex4"})
        if not loaded.ok or not loaded.header.get("ok"):
            _close(bar)
            raise TrainingFailed(f"ex4.py could not be loaded: {_why(loaded)}")
        reply = worker.ask({"op": "train", "steps": steps, "data": data}, timeout, on_progress)
    if bar is not None:
        bar.update(steps - last[0])
    _close(bar)
    if not reply.ok:
        raise TrainingFailed(f"training stopped: {reply.failure}: {reply.reason}")
    header = reply.header
    if not header.get("ok"):
        raise TrainingFailed(f"your backward failed during training: {_why(reply)}")
    try:
        params = {k: decode_value(v, reply.blob) for k, v in header["params"].items()}
        losses = decode_value(header["losses"], reply.blob)
    except (WireError, KeyError, AttributeError) as exc:
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
    if plot:
        training.plot_losses(run, plot)
    if not quiet:
        report.note(
            f"trained {run.steps} steps in {run.seconds:.0f} s: train loss {run.train_loss:.4f}, "
            f"val loss {run.val_loss:.4f}\nsamples: {', '.join(run.samples)}"
        )
    return run.to_dict()


def _close(bar):
    if bar is not None:
        bar.__exit__(None, None, None)


def _why(reply) -> str:
    if not reply.ok:
        return f"{reply.failure}: {reply.reason}"
    err = reply.header.get("error") or {}
    where = f" at line {err['line']}: `{err.get('code')}`" if err.get("line") else ""
    return f"{err.get('type')}: {err.get('message')}{where}"
