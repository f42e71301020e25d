"""Exercise 4: the whole backward pass of the compact forward, so the network trains without autograd.

The grader calls `backward` with arguments bound BY PARAMETER NAME: ask for any tensor of the compact
forward (emb embcat hprebn bnmean bnvar bnvar_inv bnraw hpreact h logits loss), any parameter (C W1 b1
W2 b2 bngain bnbias), the batch Xb / Yb or the batch size n. Return a dict with the keys
dC dW1 db1 dW2 db2 dbngain dbnbias, each the full gradient with its parameter's shape.

The grader calls `backward` again on several consecutive training steps and on a hidden second set of
sizes: keep no state between calls and take every size from n, tensor shapes or C.shape. Autograd is off
limits.

Check your work with `grade ex4` from the project root.
"""

import torch
import torch.nn.functional as F


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    """Return every parameter's gradient, derived by hand.

    forward (lecture sizes: n=32, block_size=3, n_embd=10, n_hidden=200, vocab 27):
        emb = C[Xb]                                           # (27, 10)[(32, 3)] -> (32, 3, 10)
        embcat = emb.view(emb.shape[0], -1)                   # (32, 30)
        hprebn = embcat @ W1 + b1                             # (32, 30) @ (30, 200) + (200,) -> (32, 200)
        bnmean = hprebn.mean(0, keepdim=True)                 # (1, 200)
        bnvar = hprebn.var(0, keepdim=True, unbiased=True)    # (1, 200), Bessel's 1/(n-1)
        bnvar_inv = (bnvar + 1e-5)**-0.5                      # (1, 200)
        bnraw = (hprebn - bnmean) * bnvar_inv                 # (32, 200)
        hpreact = bngain * bnraw + bnbias                     # (1, 200) * (32, 200) + (1, 200)
        h = torch.tanh(hpreact)                               # (32, 200)
        logits = h @ W2 + b2                                  # (32, 200) @ (200, 27) + (27,) -> (32, 27)
        loss = F.cross_entropy(logits, Yb)                    # ()

    returns: {"dC": (27, 10), "dW1": (30, 200), "db1": (200,), "dW2": (200, 27), "db2": (27,),
              "dbngain": (1, 200), "dbnbias": (1, 200)}
    """
    raise NotImplementedError
