# expect: item=ex1.dbnvar status=failed traps=missing-eps
# bnvar_inv recomputed without the eps, then cubed.
import torch


def dbnvar(bnvar, dbnvar_inv):
    return -0.5 * torch.rsqrt(bnvar) ** 3 * dbnvar_inv
