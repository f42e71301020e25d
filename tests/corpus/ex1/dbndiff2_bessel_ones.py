# expect: item=ex1.dbndiff2 status=failed traps=bessel
# 1/n where the forward used Bessel's 1/(n-1).
import torch


def dbndiff2(bndiff2, dbnvar, n):
    return 1.0 / n * torch.ones_like(bndiff2) * dbnvar
