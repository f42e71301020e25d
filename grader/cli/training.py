"""`grade ex4 --full`: train the lecture's network in the sandbox with the student's backward, judge it here."""

from __future__ import annotations

import hashlib
import os
import textwrap
import time
from array import array
from pathlib import Path

import click
import torch

from grader.grading.runner import read_sources
from grader.sandbox import Limits, Worker, backend, jail, wire
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


PROBE_STEPS = 50  # the opening steps, timed to set the deadline of the rest of the run
PROBE_TIMEOUT = 120.0  # their own deadline, the student's first calls included
PACE_ALLOWANCE = 3.0  # the rest may take this many times the opening pace per step ...
MARGIN = 60.0  # ... plus this many seconds


class TrainingFailed(click.ClickException):
    """The student's backward could not train the network."""


def deadline(pace: float, rest: int) -> float:
    """Return the seconds the rest of a run may take, `rest` steps after an opening measured at `pace` s a step."""
    return MARGIN + PACE_ALLOWANCE * pace * rest


def run_full(submission, *, data: str | None, steps: int, quiet: bool, plot: str | None) -> dict:
    """Train with the submission's ex4.backward (a folder, or what intake read) and return the `training` object.

    The student's backward trains once. Its first PROBE_STEPS steps are timed, and the rest of the same run gets
    deadline(pace, rest): a slower backward gets more time, one that stalls later is still stopped. With plot
    (--curve), autograd's reference curve comes from the cache, or is computed beside the training.
    """
    corpus = corpus_mod.load(data)
    training.dataset(corpus, "train", fixture.EX4_PRIMARY.block_size)  # built here: the sandbox has no files
    if isinstance(submission, Submission):
        sources, where = submission.sources, submission.name
    else:
        sources, where = read_sources(Path(submission), ["ex4"]), f"{submission}/ex4.py"
    if "ex4" not in sources:
        raise TrainingFailed(f"--full needs Ex4's backward, and there is none in {where}")
    reference = ReferenceCurve(corpus, steps) if plot else None  # started first: the opening is timed beside it
    try:
        run = _judge(*train_student(sources["ex4"], data, steps, quiet), corpus)
        if not quiet:
            report.note(
                f"trained {run.steps} steps in {run.seconds:.0f} s: train loss {run.train_loss:.4f}, "
                f"val loss {run.val_loss:.4f}\n{textwrap.fill(training.corpus_note(corpus, steps), 116)}\n"
                f"samples: {', '.join(run.samples)}"
            )
        if reference is not None:
            draw_curve(run, reference, plot)
    finally:
        if reference is not None:
            reference.stop()  # its helper, when the training failed
    return run.to_dict()


def _judge(header: dict, blob: bytes, corpus) -> training.TrainingRun:
    """Read the trained parameters and losses the sandbox sent; calibrate, evaluate and sample them here."""
    try:
        wire.check(header, TRAIN_REPLY, "training reply")
        dec = wire.Decoder(blob)
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
        return training.finish(params, losses_list, header.get("diverged_at"), float(header.get("seconds", 0)), corpus)


def train_student(source, data, steps: int, quiet: bool) -> tuple[dict, bytes]:
    """Run the student's training in a sandbox child: the timed opening, then the rest; return the final reply."""
    probe = min(steps, PROBE_STEPS)
    ceiling = PROBE_TIMEOUT + deadline(PROBE_TIMEOUT / probe, steps - probe)  # the longest the two may be given
    limits = Limits(timeout=PROBE_TIMEOUT, cpu_seconds=int(ceiling) + 60)
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
        step = int(header.get("progress", 0))
        if bar is not None:
            bar.update(step - last[0], f"loss {float(header.get('loss', float('nan'))):.4f}")
        last[0] = step

    finished = False
    try:
        with jail.held(), Worker(limits) as worker:
            loaded = worker.ask({"op": "load", "path": source.path, "text": source.text})
            if not loaded.ok or not loaded.header.get("ok"):
                raise TrainingFailed(f"ex4.py could not be loaded: {_why(loaded)}")
            started = time.monotonic()
            request = {"op": "train", "steps": steps, "data": data, "until": probe}
            reply = worker.ask(request, timeout=PROBE_TIMEOUT, on_progress=on_progress)
            if not reply.ok and reply.failure == "timeout":
                raise TrainingFailed(
                    f"training stopped: your backward did not run its first {probe} steps within "
                    f"{PROBE_TIMEOUT:g} s (more than {PROBE_TIMEOUT / probe:.2g} s a step): it hangs, or is far "
                    f"too slow to train with"
                )
            if reply.ok and reply.header.get("ok") and "paused" in reply.header:
                reply = _rest(worker, reply, time.monotonic() - started, steps, on_progress, last)
        finished = True
    finally:
        if bar is not None:
            if finished:
                bar.update(max(0, steps - last[0]))
            _close(bar)
    if not reply.ok:
        raise TrainingFailed(f"training stopped: {reply.failure}: {reply.reason}")
    if not reply.header.get("ok"):
        raise TrainingFailed(f"your backward failed during training: {_why(reply)}")
    return reply.header, reply.blob


def _rest(worker, opening, seconds: float, steps: int, on_progress, last):
    """Run the rest of a training whose opening took `seconds`, under a deadline scaled from that pace."""
    try:
        wire.check(opening.header, {"ok": bool, "paused": int, "seconds": float}, "training reply")
    except WireError as exc:
        raise TrainingFailed(f"the sandbox sent an unreadable result: {exc}") from None
    done = opening.header["paused"]
    if not 0 < done < steps:
        raise TrainingFailed(f"the sandbox sent an unreadable result: paused at step {done} of {steps}")
    pace, rest = seconds / done, steps - done
    timeout = deadline(pace, rest)
    reply = worker.ask({"op": "train", "resume": True}, timeout=timeout, on_progress=on_progress)
    if not reply.ok and reply.failure == "timeout":
        raise TrainingFailed(
            f"training stopped: your backward ran its first {done} steps at {pace * 1000:.3g} ms a step, then did "
            f"not finish the other {rest:,} within {_duration(timeout)} ({PACE_ALLOWANCE:g}x that pace plus "
            f"{MARGIN:g} s); it had passed step {last[0]:,}. It got much slower, or stopped."
        )
    return reply


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def reference_losses(corpus, steps: int) -> list[float]:
    """Return the per-step losses of training with autograd's gradients, same seed, batches and steps."""
    return training.autograd_losses(corpus, steps)


class ReferenceCurve:
    """autograd's loss curve for --curve: from the cache, or computed in a helper beside the student's training.

    Where this process cannot fork (the spawn backend), it is computed in result(), after the training.
    """

    def __init__(self, corpus: corpus_mod.Corpus, steps: int):
        self.corpus, self.steps = corpus, steps
        self.path = cache_path(corpus, steps)
        self.cached = read_cached(self.path, steps)
        self.job = None
        if self.cached is None and backend() == "fork":
            from grader.classroom.pool import Background

            self.job = Background(lambda: training.autograd_losses(corpus, steps))

    def result(self) -> list[float]:
        """Return the reference losses (waiting for the helper), and keep them in the cache."""
        if self.cached is not None:
            return self.cached
        if self.job is not None:
            losses = self.job.result(timeout=max(900.0, self.steps * 0.02))
        else:
            losses = training.autograd_losses(self.corpus, self.steps)
        write_cached(self.path, losses)
        return losses

    def stop(self) -> None:
        """Stop the helper, if there is one still running."""
        if self.job is not None:
            self.job.kill()


def cache_path(corpus: corpus_mod.Corpus, steps: int) -> Path | None:
    """Return where autograd's reference curve for this corpus and step count is cached, or None for no cache.

    GRADER_CACHE (a folder; empty: no cache), else $XDG_CACHE_HOME or ~/.cache, then backprop-ninja-grader/. The
    name holds everything the curve depends on: the corpus, steps, seed, learning rates, geometry and torch.
    """
    base = os.environ.get("GRADER_CACHE")
    if base is None:
        base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
        base = Path(base) / "backprop-ninja-grader"
    if not str(base):
        return None
    key = (
        corpus.digest,
        steps,
        training.BATCH_SEED,
        training.LR,
        training.LR_LATE,
        fixture.EX4_PRIMARY,
        torch.__version__,
    )
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    return Path(base) / f"autograd-curve-{corpus.digest}-{steps}-{digest}.f32"


def read_cached(path: Path | None, steps: int) -> list[float] | None:
    """Return the cached curve at path, or None when there is none (or it is not one of `steps` losses)."""
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) != 4 * steps:
        return None
    return array("f", data).tolist()


def write_cached(path: Path | None, losses: list[float]) -> None:
    """Keep the curve at path for the next --curve (nothing when that cannot be written)."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(array("f", losses).tobytes())
        os.replace(tmp, path)
    except OSError:
        pass


def draw_curve(run: training.TrainingRun, reference: ReferenceCurve, path) -> None:
    """Draw the student's loss curve beside autograd's on the same seed and steps; say where it went."""
    from grader.show import plots

    try:
        losses = reference.result()
    except RuntimeError as exc:  # the helper failed or ran out of time: the training's result still stands
        report.note(f"--curve: no picture written; autograd's reference curve failed: {exc}")
        return
    try:
        run.plot = plots.plot_loss_curves(run.losses, losses, path, train=run.train_loss, val=run.val_loss)
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
