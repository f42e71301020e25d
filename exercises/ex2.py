"""Exercise 2: the gradient of the cross-entropy loss with respect to the logits, in one go.

The grader calls `dlogits` with arguments bound BY PARAMETER NAME: ask for any forward tensor (logits,
probs, ...), any parameter, the batch Xb / Yb or the batch size n. No gradients are given here, and
autograd is off limits. Sizes below are the lecture's (n=32, vocab 27); the grader also runs other
sizes, so take them from n and tensor shapes.

Check your work with `grade ex2` from the project root.
"""

import torch
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    """Return the gradient of the loss with respect to logits, without the intermediate steps.

    forward: loss = F.cross_entropy(logits, Yb)    # logits (32, 27), Yb (32,) -> loss ()
    """
    raise NotImplementedError
