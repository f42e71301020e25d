# expect: item=ex1.dlogits status=passed traps=
# In-place ops are fine on a tensor the student made (the clone).
import torch


def dlogits(logits, dnorm_logits, dlogit_maxes, n):
    d = dnorm_logits.clone()
    d[torch.arange(n), logits.argmax(1)] += dlogit_maxes[:, 0]
    return d
