# expect: item=ex2.dlogits status=failed traps=uses-autograd
import torch
import torch.nn.functional as F


def dlogits(logits, Yb):
    x = logits.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(F.cross_entropy(x, Yb), x)
    return g
