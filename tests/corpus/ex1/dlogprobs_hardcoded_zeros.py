# expect: item=ex1.dlogprobs status=failed traps=hardcoded-size
import torch


def dlogprobs(Yb, n):
    d = torch.zeros(32, 27)
    d[range(n), Yb] = -1.0 / n
    return d
