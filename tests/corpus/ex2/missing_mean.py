# expect: item=ex2.dlogits status=failed traps=scaled
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    return d
