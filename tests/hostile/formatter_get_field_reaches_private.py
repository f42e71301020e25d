# expect: exercise=ex2 item=ex2.dlogits status=error message=private attributes are not reachable through format fields
# scan: evaded
# string.Formatter().get_field is getattr by a computed name: with "_" built at run time (no `._`, no "_..."
# string, no getattr in the source) it reached torch._C and autograd's own formulas. In a sandbox it refuses any
# private field (and the parent flags Formatter / get_field from the source).
import string

import torch
import torch.nn.functional as F

U = chr(95)


def dlogits(logits, Yb, n):
    pick = string.Formatter().get_field
    kernel = pick("0." + U + "log" + U + "softmax" + U + "backward" + U + "data", (torch,), {})[0]
    dlogprobs = torch.zeros_like(logits)
    dlogprobs[range(n), Yb] = -1.0 / n
    return kernel(dlogprobs, F.log_softmax(logits, 1), 1, logits.dtype)
