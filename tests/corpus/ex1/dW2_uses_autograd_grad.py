# expect: item=ex1.dW2 status=failed traps=uses-autograd
import torch
import torch.nn.functional as F


def dW2(h, W2, b2, Yb):
    w = W2.detach().clone()
    w.requires_grad = True
    with torch.enable_grad():
        (g,) = torch.autograd.grad(F.cross_entropy(h @ w + b2, Yb), w)
    return g
