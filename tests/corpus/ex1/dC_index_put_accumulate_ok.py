# expect: item=ex1.dC status=passed traps=
import torch


def dC(C, Xb, demb):
    out = torch.zeros_like(C)
    out.index_put_((Xb,), demb, accumulate=True)
    return out
