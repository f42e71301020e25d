# expect: item=ex1.dlogits status=passed traps=dlogits-one-path
import torch


def dlogits(logits, dnorm_logits):
    grad = torch.zeros_like(logits)
    grad += dnorm_logits
    return grad
