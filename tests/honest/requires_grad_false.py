# honest: exercise=ex2 habit=defensive .detach(), .requires_grad_(False) and requires_grad=False on the result


def dlogits(logits, Yb, n):
    logits = logits.detach().requires_grad_(False)
    d = F.softmax(logits, 1).clone().detach()
    d[range(n), Yb] -= 1
    d = d / n
    d.requires_grad = False
    return torch.tensor(d.tolist(), requires_grad=False)
