# honest: exercise=ex1 habit=torch.where and boolean masks


def dlogits(logits, dnorm_logits, dlogit_maxes):
    is_max = logits == logits.max(1, keepdim=True).values
    first = is_max & (is_max.cumsum(1) == 1)  # the max that logits.max picked (the first one)
    return dnorm_logits + torch.where(first, dlogit_maxes, torch.zeros_like(dlogit_maxes))


def dhpreact(h, dh):
    return torch.where(h.abs() < 1.0, 1.0 - h * h, torch.zeros_like(h)) * dh
