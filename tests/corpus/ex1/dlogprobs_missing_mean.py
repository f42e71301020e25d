# expect: item=ex1.dlogprobs status=failed traps=scaled
# The mean's 1/n is forgotten: every entry is n times too large.
import torch


def dlogprobs(logprobs, Yb, n):
    d = torch.zeros_like(logprobs)
    d[range(n), Yb] = -1.0
    return d
