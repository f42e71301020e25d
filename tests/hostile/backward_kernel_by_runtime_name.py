# expect: exercise=ex2 item=ex2.dlogits status=failed message=uses-autograd
# torch's own log_softmax backward kernel, reached through a name built at run time and an imported attrgetter:
# no `getattr`, no `._`, no "_backward" in the source for the internals scan to see. The child's kernel watch
# sees the aten op itself, however it was reached.
import torch
import torch.nn.functional as F
from operator import attrgetter as pick

KERNEL = chr(95).join(["", "log", "softmax", "backward", "data"])


def dlogits(logits, Yb, n):
    dlogprobs = torch.zeros_like(logits)
    dlogprobs[range(n), Yb] = -1.0 / n
    return pick(KERNEL)(torch)(dlogprobs, F.log_softmax(logits, 1), 1, logits.dtype)
