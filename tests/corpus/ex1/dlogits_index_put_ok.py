# expect: item=ex1.dlogits status=passed traps=
# The max path added by advanced indexing (one entry per row, so no repeats).
import torch


def dlogits(logits, dnorm_logits, dlogit_maxes, n):
    d = dnorm_logits.clone()
    d[torch.arange(n), logits.max(1).indices] += dlogit_maxes[:, 0]
    return d
