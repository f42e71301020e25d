"""The `train` request a sandbox child serves for `grade ex4 --full`: SGD on the student's backward, in the child."""

from __future__ import annotations

import torch

from grader.sandbox import forget, wire
from grader.sandbox.child import describe_exception
from grader.training import sgd
from grader.truth import corpus as corpus_mod


def train(server, request) -> tuple[dict, bytes]:
    """Run `grade ex4 --full`'s SGD loop on the student's backward; the parent evaluates the result."""
    student_backward = server.student_function("backward")
    every = max(1, request["steps"] // 100)

    def progress(step, loss):
        server.send({"progress": step, "loss": loss})

    enc = wire.Encoder()
    try:
        corpus = corpus_mod.load(request.get("data"))
        params, losses, diverged_at, seconds = sgd.sgd(
            student_backward, corpus, request["steps"], progress=progress, progress_every=every
        )
    except BaseException as exc:  # noqa: B036 - the student's code runs inside this loop
        error = describe_exception(exc, server.path)
        return {"ok": False, "error": error, "autograd": server.autograd_calls()}, b""
    header = {
        "ok": True,
        "params": {k: enc.value(v) for k, v in params.items()},
        "losses": enc.value(torch.tensor(losses, dtype=torch.float32)),
        "diverged_at": diverged_at,
        "seconds": seconds,
    }
    return header, enc.blob()


forget.serve("train", train)  # registered in the parent on import, before any child forks
