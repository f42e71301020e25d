# expect: item=ex1.dC status=passed traps=
import torch


def dC(C, Xb, demb):
    g = torch.zeros(C.shape)
    for i, row in zip(Xb.flatten().tolist(), demb.reshape(-1, C.shape[1]), strict=True):
        g[i] += row
    return g
