# expect: item=ex1.dhpreact status=failed traps=tanh-preact
import torch


def dhpreact(hpreact, dh):
    local = 1.0 - torch.pow(hpreact, 2)
    return dh * local
