# expect: item=ex1.dC status=failed traps=dC-repeated-rows
# The double loop with = instead of +=: later lookups of the same row overwrite earlier ones.
import torch


def dC(C, Xb, demb):
    grad = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            grad[ix] = demb[k, j]
    return grad
