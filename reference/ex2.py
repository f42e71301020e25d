"""Reference solution for Exercise 2: the gradient of cross-entropy with respect to the logits, in one go."""

import torch  # noqa: F401
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    d /= n
    return d
