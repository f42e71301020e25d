# honest: exercise=ex1 habit=imports inside a function (numpy, math, torch.nn.functional)


def dlogits(logits, dnorm_logits, dlogit_maxes):
    import torch.nn.functional as Fn

    onehot = Fn.one_hot(logits.max(1).indices, num_classes=logits.shape[1])
    return dnorm_logits + onehot * dlogit_maxes


def dcounts_sum(counts_sum, dcounts_sum_inv):
    import math

    from numpy import float32

    assert math.isfinite(float(float32(1.0)))
    return -counts_sum.pow(-2) * dcounts_sum_inv
