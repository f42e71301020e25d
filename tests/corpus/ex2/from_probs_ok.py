# expect: item=ex2.dlogits status=passed traps=
# Asks for the forward tensor probs instead of recomputing the softmax.
import torch.nn.functional as F


def dlogits(probs, Yb, n):
    target = F.one_hot(Yb, num_classes=probs.shape[1]).to(probs.dtype)
    return (probs - target) / n
