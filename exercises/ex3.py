"""Exercise 3: the BatchNorm backward pass as a single expression.

The grader calls `dhprebn` with arguments bound BY PARAMETER NAME: ask for dhpreact (the true upstream
gradient), any forward tensor (hprebn, bnraw, bnvar_inv, ...), any parameter (bngain, ...) or the batch
size n. Sizes below are the lecture's (n=32, n_hidden=64); the grader also runs other sizes, so take
them from n and tensor shapes. Autograd is off limits.

Check your work with `grade ex3` from the project root.
"""

import torch
import torch.nn.functional as F


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    """Return the gradient of the loss with respect to hprebn, through the whole BatchNorm layer at once.

    forward: bnmeani = 1/n * hprebn.sum(0, keepdim=True)                  # (32, 64) -> (1, 64)
             bnvar = 1/(n-1) * ((hprebn - bnmeani)**2).sum(0, keepdim=True) # (1, 64), Bessel's correction
             bnvar_inv = (bnvar + 1e-5)**-0.5                              # (1, 64)
             bnraw = (hprebn - bnmeani) * bnvar_inv                        # (32, 64)
             hpreact = bngain * bnraw + bnbias                             # (32, 64)
    """
    raise NotImplementedError
