# expect: item=ex2.dlogits status=failed traps=sign-flip
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    return (F.one_hot(Yb, logits.shape[1]) - F.softmax(logits, 1)) / n
