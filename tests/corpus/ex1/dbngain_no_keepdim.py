# expect: item=ex1.dbngain status=failed traps=shape-mismatch
import torch


def dbngain(bnraw, dhpreact):
    return torch.sum(bnraw * dhpreact, dim=0)
