# expect: item=ex2.dlogits status=error traps=
# Right values, computed in numpy from a list: numpy's array is float64, and so is the tensor made from it.
import numpy as np
import torch


def dlogits(logits, Yb, n):
    x = np.array(logits.tolist())
    e = np.exp(x - x.max(1, keepdims=True))
    d = e / e.sum(1, keepdims=True)
    d[np.arange(n), Yb.tolist()] -= 1
    return torch.tensor(d / n)
