# expect: item=ex2.dlogits status=passed traps=
# torch.inference_mode with its argument, as a context manager: the sandbox's stand-in takes it.
import torch
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    with torch.inference_mode(mode=False), torch.inference_mode(True):
        d = F.softmax(logits, 1)  # (32, 27)
        d[range(n), Yb] -= 1
        return d / n
