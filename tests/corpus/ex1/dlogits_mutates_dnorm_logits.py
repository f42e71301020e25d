# expect: item=ex1.dlogits status=failed traps=mutates-input
# Right value, but d is dnorm_logits itself (no clone), so += writes into the grader's input.
import torch.nn.functional as F


def dlogits(logits, dnorm_logits, dlogit_maxes):
    d = dnorm_logits
    d += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
    return d
