# expect: item=ex1.dh status=failed traps=uses-autograd
# Rebuilds the rest of the graph and lets autograd do the work.
import torch
import torch.nn.functional as F


def dh(h, W2, b2, Yb):
    x = h.clone().requires_grad_()
    with torch.enable_grad():
        loss = F.cross_entropy(x @ W2 + b2, Yb)
        loss.backward()
    return x.grad
