# expect: item=ex1.dC status=failed traps=dC-repeated-rows
# Looks right and never errors, but a row of C looked up twice in Xb only receives one contribution.
import torch


def dC(C, Xb, demb):
    dC = torch.zeros_like(C)
    dC[Xb] += demb
    return dC
