# expect: item=ex1.dC status=passed traps=
import torch


def dC(C, Xb, demb):
    rows = demb.reshape(-1, C.shape[1])
    index = Xb.reshape(-1, 1).expand(-1, C.shape[1])
    return torch.zeros_like(C).scatter_add_(0, index, rows)
