# expect: exercise=ex2 item=ex2.dlogits status=error message=Not run:
# Autograd's own formula without a kernel and without a flag: torch._decomp holds every backward formula again
# as plain Python over ordinary ops (no aten::*_backward kernel runs, so no hook sees it), and getattr comes from
# a frame's f_builtins (an async generator's ag_frame: neither word is in the internals scan), with every name
# built at run time (the decorators are peeled off through __wrapped__: out_wrapper would import sympy, which
# the empty room lacks). No `._`, no "_...", no getattr, no backward kernel's name in the text. Now the scan
# names a frame (ag_frame, f_builtins) a route out: ex2.py is refused before it runs.
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


async def _holder():
    yield


_pick = _holder().ag_frame.f_builtins["get" + "attr"]
U = chr(95)


def dlogits(logits, Yb, n):
    formulas = _pick(_pick(torch, U + "decomp"), "decompositions")
    formula = _pick(formulas, U + "log" + U + "softmax" + U + "back" + "ward" + U + "data")
    while _pick(formula, U + U + "wrapped" + U + U, None) is not None:  # out_wrapper would import sympy
        formula = _pick(formula, U + U + "wrapped" + U + U)
    dlogprobs = torch.zeros_like(logits)
    dlogprobs[range(n), Yb] = -1.0 / n
    return formula(dlogprobs, F.log_softmax(logits, 1), 1, logits.dtype)
