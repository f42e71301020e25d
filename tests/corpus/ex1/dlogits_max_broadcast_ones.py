# expect: item=ex1.dlogits status=passed traps=dlogits-max-broadcast
# A ones_like broadcast of dlogit_maxes over the whole row.
import torch


def dlogits(logits, dnorm_logits, dlogit_maxes):
    d = dnorm_logits.clone()
    d += torch.ones_like(logits) * dlogit_maxes
    return d
