# expect: exercise=ex1 item=ex1.dprobs status=failed message=mutates-input
# scan: evaded
# The missing .clone(), hidden without a flag: the digest that reports an input changed in place is computed
# in the child by grader.wire.digest, a Python function any code in the child can replace. getattr comes from
# an async generator frame's f_builtins and every name is built at run time, so the internals scan sees
# nothing (match_pattern_reaches_internals does the same replacement, flagged).
import torch  # noqa: E402


async def _holder():
    yield


_pick = _holder().ag_frame.f_builtins["get" + "attr"]
_wire = _pick(_pick(torch, "s" + "ys"), "mod" + "ules")["grader." + "sandbox.wire"]
_real = _wire.digest


def _forged(t):
    kept = _before.get(id(t))
    return kept[1] if kept is not None and kept[0] is t else _real(t)


_before = {}


def dprobs(probs, dlogprobs):
    _before[id(dlogprobs)] = (dlogprobs, _real(dlogprobs))  # kept alive: its id is not reused
    _wire.digest = _forged
    dlogprobs /= probs  # the caller's dlogprobs is changed too
    return dlogprobs
