# honest: exercise=ex1 habit=list comprehensions building tensors (torch.stack, torch.cat)


def dC(C, Xb, demb):
    rows = [demb[Xb == i].sum(0) for i in range(C.shape[0])]
    return torch.stack(rows)


def dembcat(W1, dhprebn):
    return torch.cat([dhprebn @ W1[i : i + 1].T for i in range(W1.shape[0])], dim=1)


def dlogprobs(logprobs, Yb, n):
    return torch.stack([torch.where(torch.arange(logprobs.shape[1]) == y, -1.0 / n, 0.0) for y in Yb.tolist()])
