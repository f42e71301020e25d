# expect: item=ex1.dC status=passed traps=
import torch


def dC(C, Xb, demb):
    out = torch.zeros_like(C)
    out.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    return out
