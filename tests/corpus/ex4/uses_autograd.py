# expect: item=ex4.dW2 status=failed traps=uses-autograd
# Rebuilds the compact forward and calls loss.backward().
import torch
import torch.nn.functional as F


def backward(Xb, Yb, C, W1, b1, W2, b2, bngain, bnbias):
    params = [p.clone().requires_grad_() for p in (C, W1, b1, W2, b2, bngain, bnbias)]
    C_, W1_, b1_, W2_, b2_, g_, bb_ = params
    with torch.enable_grad():
        hpre = C_[Xb].view(Xb.shape[0], -1) @ W1_ + b1_
        raw = (hpre - hpre.mean(0, keepdim=True)) * (hpre.var(0, keepdim=True) + 1e-5) ** -0.5
        loss = F.cross_entropy(torch.tanh(g_ * raw + bb_) @ W2_ + b2_, Yb)
        loss.backward()
    names = ["dC", "dW1", "db1", "dW2", "db2", "dbngain", "dbnbias"]
    return {k: p.grad for k, p in zip(names, params, strict=True)}
