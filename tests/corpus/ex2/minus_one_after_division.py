# expect: item=ex2.dlogits status=failed traps=label-entries
# The 1 is subtracted after the division by n, so it escapes the division.
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    d = F.softmax(logits, 1) / n
    d[range(n), Yb] -= 1
    return d
