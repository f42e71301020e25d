"""The `train` request a sandbox child serves for `grade ex4 --full`: SGD on the student's backward, in the child.

The parent asks twice: first for the opening steps alone (`until`), which it times, then (`resume`) for the rest
of the same run under a deadline scaled from that pace. Between the two the loop waits here, in the child.
"""

from __future__ import annotations

import torch

from grader.sandbox import forget, wire
from grader.sandbox.child import describe_exception
from grader.training import sgd
from grader.truth import corpus as corpus_mod

_PAUSED: list[sgd.Loop] = []  # the run between its two requests (one at most)


def train(server, request) -> tuple[dict, bytes]:
    """Run `grade ex4 --full`'s SGD loop on the student's backward; the parent evaluates the result.

    {"steps": S, "data": path or None, "until": K}: start the run and stop after step K (default S); a run that
    stopped early is kept for {"resume": true}, which runs the rest. The reply to a run stopped early is
    {"ok": true, "paused": steps run, "seconds": ...}; to a finished one, the parameters and the losses.
    """
    enc = wire.Encoder()
    try:
        if request.get("resume"):
            if not _PAUSED:
                return {"ok": False, "error": {"type": "GraderError", "message": "no training run to resume"}}, b""
            loop = _PAUSED.pop().run()
        else:
            del _PAUSED[:]
            every = max(1, request["steps"] // 100)
            loop = sgd.Loop(
                server.student_function("backward"),
                corpus_mod.load(request.get("data")),
                request["steps"],
                progress=lambda step, loss: server.send({"progress": step, "loss": loss}),
                progress_every=every,
            )
            loop.run(request.get("until"))
    except BaseException as exc:  # noqa: B036 - the student's code runs inside this loop
        error = describe_exception(exc, server.path)
        return {"ok": False, "error": error, "autograd": server.autograd_calls()}, b""
    if not loop.done:
        _PAUSED.append(loop)
        return {"ok": True, "paused": len(loop.losses), "seconds": loop.seconds}, b""
    params, losses, diverged_at, seconds = loop.result()
    header = {
        "ok": True,
        "params": {k: enc.value(v) for k, v in params.items()},
        "losses": enc.value(torch.tensor(losses, dtype=torch.float32)),
        "diverged_at": diverged_at,
        "seconds": seconds,
    }
    return header, enc.blob()


forget.serve("train", train)  # registered in the parent on import, before any child forks
