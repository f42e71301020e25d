# expect: item=ex2.dlogits status=passed traps=
# Softmax by hand, then subtract 1 at the correct class, then average over the batch.
import torch


def dlogits(logits, Yb):
    batch = logits.shape[0]
    e = (logits - logits.max(1, keepdim=True).values).exp()
    p = e / e.sum(1, keepdim=True)
    p[torch.arange(batch), Yb] -= 1.0
    return p / batch
