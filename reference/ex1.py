"""Reference solution for Exercise 1: backpropagate by hand through every atomic step of the forward pass.

Each function returns the full gradient of one variable (same shape as the variable), given the forward
tensors, the parameters and the true gradients of the variables that come after it in the forward pass.
"""

import torch
import torch.nn.functional as F


def dlogprobs(logprobs, Yb, n):
    """Gradient of loss = -logprobs[range(n), Yb].mean() with respect to logprobs."""
    d = torch.zeros_like(logprobs)
    d[range(n), Yb] = -1.0 / n
    return d


def dprobs(probs, dlogprobs):
    return (1.0 / probs) * dlogprobs


def dcounts_sum_inv(counts, dprobs):
    return (counts * dprobs).sum(1, keepdim=True)


def dcounts_sum(counts_sum, dcounts_sum_inv):
    return (-(counts_sum**-2)) * dcounts_sum_inv


def dcounts(counts, counts_sum_inv, dprobs, dcounts_sum):
    d = counts_sum_inv * dprobs  # path through probs
    d += torch.ones_like(counts) * dcounts_sum  # path through counts_sum
    return d


def dnorm_logits(counts, dcounts):
    return counts * dcounts


def dlogit_maxes(dnorm_logits):
    return (-dnorm_logits).sum(1, keepdim=True)


def dlogits(logits, dnorm_logits, dlogit_maxes):
    d = dnorm_logits.clone()  # path through norm_logits
    d += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes  # path through the max
    return d


def dh(W2, dlogits):
    return dlogits @ W2.T


def dW2(h, dlogits):
    return h.T @ dlogits


def db2(dlogits):
    return dlogits.sum(0)


def dhpreact(h, dh):
    return (1.0 - h**2) * dh


def dbngain(bnraw, dhpreact):
    return (bnraw * dhpreact).sum(0, keepdim=True)


def dbnbias(dhpreact):
    return dhpreact.sum(0, keepdim=True)


def dbnraw(bngain, dhpreact):
    return bngain * dhpreact


def dbnvar_inv(bndiff, dbnraw):
    return (bndiff * dbnraw).sum(0, keepdim=True)


def dbnvar(bnvar, dbnvar_inv):
    return (-0.5 * (bnvar + 1e-5) ** -1.5) * dbnvar_inv


def dbndiff2(bndiff2, dbnvar, n):
    return 1.0 / (n - 1) * torch.ones_like(bndiff2) * dbnvar


def dbndiff(bndiff, bnvar_inv, dbnraw, dbndiff2):
    d = bnvar_inv * dbnraw  # path through bnraw
    d += 2 * bndiff * dbndiff2  # path through bndiff2
    return d


def dbnmeani(dbndiff):
    return (-dbndiff).sum(0, keepdim=True)


def dhprebn(hprebn, dbndiff, dbnmeani, n):
    d = dbndiff.clone()  # path through bndiff
    d += 1.0 / n * torch.ones_like(hprebn) * dbnmeani  # path through bnmeani
    return d


def dembcat(W1, dhprebn):
    return dhprebn @ W1.T


def dW1(embcat, dhprebn):
    return embcat.T @ dhprebn


def db1(dhprebn):
    return dhprebn.sum(0)


def demb(emb, dembcat):
    return dembcat.view(emb.shape)


def dC(C, Xb, demb):
    d = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            d[ix] += demb[k, j]
    return d
