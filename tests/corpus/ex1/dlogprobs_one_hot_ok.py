# expect: item=ex1.dlogprobs status=passed traps=
import torch.nn.functional as F


def dlogprobs(logprobs, Yb, n):
    return -F.one_hot(Yb, num_classes=logprobs.shape[1]).float() / n
