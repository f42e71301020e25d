# expect: item=ex1.db2 status=passed traps=
# numpy is allowed, and an ndarray's own .sum imports numpy's helpers lazily: they are there in the sandbox.
import numpy as np
import torch


def db2(dlogits):
    return torch.from_numpy(np.asarray(dlogits).sum(0))  # (27,)
