# expect: item=ex1.dlogprobs status=failed traps=hardcoded-size
import torch


def dlogprobs(logprobs, Yb, n):
    d = torch.zeros_like(logprobs)
    d[range(32), Yb] = -1.0 / n
    return d
