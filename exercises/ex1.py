"""Exercise 1: backpropagate by hand through every atomic step of the forward pass.

Write one function per gradient, in backprop order. The grader calls each function with arguments bound
BY PARAMETER NAME (like pytest fixtures), so the names you choose decide what you receive:

* any forward tensor: emb embcat hprebn bnmeani bndiff bndiff2 bnvar bnvar_inv bnraw hpreact h logits
  logit_maxes norm_logits counts counts_sum counts_sum_inv probs logprobs loss
* any parameter: C W1 b1 W2 b2 bngain bnbias
* the batch Xb (n, block_size), Yb (n,) and the batch size n (an int)
* the gradient d<var> of any variable that comes EARLIER in backprop order (the grader passes autograd's
  true value, so one mistake does not spoil the rest)

Each function returns the FULL gradient of its variable: exactly the variable's shape, every path summed.
Shapes below are for the lecture's sizes (n=32, block_size=3, n_embd=10, n_hidden=64, vocab 27), but the
grader also runs other sizes: take sizes from n and from tensor shapes, never write the numbers in.
Only torch, torch.nn.functional and math may be imported; autograd is off limits.

Check your work with `grade ex1` from the project root.
"""

import torch
import torch.nn.functional as F


def dlogprobs(logprobs, Yb, n):
    """Return the gradient of the loss with respect to logprobs.

    forward: loss = -logprobs[range(n), Yb].mean()    # logprobs (32, 27) -> loss ()
    """
    raise NotImplementedError


def dprobs(probs, dlogprobs):
    """Return the gradient of the loss with respect to probs.

    forward: logprobs = probs.log()    # (32, 27) -> (32, 27)
    """
    raise NotImplementedError


def dcounts_sum_inv(counts, dprobs):
    """Return the gradient of the loss with respect to counts_sum_inv.

    forward: probs = counts * counts_sum_inv    # (32, 27) * (32, 1) -> (32, 27)
    """
    raise NotImplementedError


def dcounts_sum(counts_sum, dcounts_sum_inv):
    """Return the gradient of the loss with respect to counts_sum.

    forward: counts_sum_inv = counts_sum**-1    # (32, 1) -> (32, 1)
    """
    raise NotImplementedError


def dcounts(counts, counts_sum_inv, dprobs, dcounts_sum):
    """Return the gradient of the loss with respect to counts (counts is used twice).

    forward: counts_sum = counts.sum(1, keepdim=True)    # (32, 27) -> (32, 1)
             probs = counts * counts_sum_inv             # (32, 27) * (32, 1) -> (32, 27)
    """
    raise NotImplementedError


def dnorm_logits(counts, dcounts):
    """Return the gradient of the loss with respect to norm_logits.

    forward: counts = norm_logits.exp()    # (32, 27) -> (32, 27)
    """
    raise NotImplementedError


def dlogit_maxes(dnorm_logits):
    """Return the gradient of the loss with respect to logit_maxes.

    forward: norm_logits = logits - logit_maxes    # (32, 27) - (32, 1) -> (32, 27)
    """
    raise NotImplementedError


def dlogits(logits, dnorm_logits, dlogit_maxes):
    """Return the gradient of the loss with respect to logits (logits is used twice).

    forward: logit_maxes = logits.max(1, keepdim=True).values    # (32, 27) -> (32, 1)
             norm_logits = logits - logit_maxes                  # (32, 27) - (32, 1) -> (32, 27)
    """
    raise NotImplementedError


def dh(W2, dlogits):
    """Return the gradient of the loss with respect to h.

    forward: logits = h @ W2 + b2    # (32, 64) @ (64, 27) + (27,) -> (32, 27)
    """
    raise NotImplementedError


def dW2(h, dlogits):
    """Return the gradient of the loss with respect to W2.

    forward: logits = h @ W2 + b2    # (32, 64) @ (64, 27) + (27,) -> (32, 27)
    """
    raise NotImplementedError


def db2(dlogits):
    """Return the gradient of the loss with respect to b2.

    forward: logits = h @ W2 + b2    # (32, 64) @ (64, 27) + (27,) -> (32, 27); b2 is (27,)
    """
    raise NotImplementedError


def dhpreact(h, dh):
    """Return the gradient of the loss with respect to hpreact.

    forward: h = torch.tanh(hpreact)    # (32, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbngain(bnraw, dhpreact):
    """Return the gradient of the loss with respect to bngain.

    forward: hpreact = bngain * bnraw + bnbias    # (1, 64) * (32, 64) + (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbnbias(dhpreact):
    """Return the gradient of the loss with respect to bnbias.

    forward: hpreact = bngain * bnraw + bnbias    # (1, 64) * (32, 64) + (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbnraw(bngain, dhpreact):
    """Return the gradient of the loss with respect to bnraw.

    forward: hpreact = bngain * bnraw + bnbias    # (1, 64) * (32, 64) + (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbnvar_inv(bndiff, dbnraw):
    """Return the gradient of the loss with respect to bnvar_inv.

    forward: bnraw = bndiff * bnvar_inv    # (32, 64) * (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbnvar(bnvar, dbnvar_inv):
    """Return the gradient of the loss with respect to bnvar.

    forward: bnvar_inv = (bnvar + 1e-5)**-0.5    # (1, 64) -> (1, 64)
    """
    raise NotImplementedError


def dbndiff2(bndiff2, dbnvar, n):
    """Return the gradient of the loss with respect to bndiff2.

    forward: bnvar = 1/(n-1) * bndiff2.sum(0, keepdim=True)    # (32, 64) -> (1, 64), Bessel's correction
    """
    raise NotImplementedError


def dbndiff(bndiff, bnvar_inv, dbnraw, dbndiff2):
    """Return the gradient of the loss with respect to bndiff (bndiff is used twice).

    forward: bndiff2 = bndiff**2              # (32, 64) -> (32, 64)
             bnraw = bndiff * bnvar_inv       # (32, 64) * (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dbnmeani(dbndiff):
    """Return the gradient of the loss with respect to bnmeani.

    forward: bndiff = hprebn - bnmeani    # (32, 64) - (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dhprebn(hprebn, dbndiff, dbnmeani, n):
    """Return the gradient of the loss with respect to hprebn (hprebn is used twice).

    forward: bnmeani = 1/n * hprebn.sum(0, keepdim=True)    # (32, 64) -> (1, 64)
             bndiff = hprebn - bnmeani                      # (32, 64) - (1, 64) -> (32, 64)
    """
    raise NotImplementedError


def dembcat(W1, dhprebn):
    """Return the gradient of the loss with respect to embcat.

    forward: hprebn = embcat @ W1 + b1    # (32, 30) @ (30, 64) + (64,) -> (32, 64)
    """
    raise NotImplementedError


def dW1(embcat, dhprebn):
    """Return the gradient of the loss with respect to W1.

    forward: hprebn = embcat @ W1 + b1    # (32, 30) @ (30, 64) + (64,) -> (32, 64)
    """
    raise NotImplementedError


def db1(dhprebn):
    """Return the gradient of the loss with respect to b1.

    forward: hprebn = embcat @ W1 + b1    # (32, 30) @ (30, 64) + (64,) -> (32, 64); b1 is (64,)
    """
    raise NotImplementedError


def demb(emb, dembcat):
    """Return the gradient of the loss with respect to emb.

    forward: embcat = emb.view(emb.shape[0], -1)    # (32, 3, 10) -> (32, 30)
    """
    raise NotImplementedError


def dC(C, Xb, demb):
    """Return the gradient of the loss with respect to the embedding table C.

    forward: emb = C[Xb]    # C (27, 10) indexed by Xb (32, 3) -> (32, 3, 10)
    A row of C may be looked up many times in one batch.
    """
    raise NotImplementedError
