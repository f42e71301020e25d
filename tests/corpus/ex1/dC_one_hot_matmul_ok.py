# expect: item=ex1.dC status=passed traps=
import torch.nn.functional as F


def dC(C, Xb, demb):
    onehot = F.one_hot(Xb.view(-1), num_classes=C.shape[0]).float()  # (n*block_size, vocab)
    return onehot.T @ demb.view(-1, C.shape[1])
