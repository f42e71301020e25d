# expect: item=ex2.dlogits status=failed traps=label-entries
# softmax over n without the one-hot target: only each row's label entry is wrong.
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    return F.softmax(logits, 1) / n
