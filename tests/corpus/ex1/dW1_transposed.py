# expect: item=ex1.dW1 status=failed traps=shape-mismatch,transposed
import torch


def dW1(embcat, dhprebn):
    return torch.matmul(dhprebn.T, embcat)
