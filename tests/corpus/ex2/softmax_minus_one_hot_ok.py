# expect: item=ex2.dlogits status=passed traps=
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    return (F.softmax(logits, dim=1) - F.one_hot(Yb, num_classes=logits.shape[1])) / n
