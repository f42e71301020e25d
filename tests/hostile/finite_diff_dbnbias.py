# expect: exercise=ex1 item=ex1.dbnbias status=any flag=numeric_differentiation
# Central finite differences of the whole forward pass, in float64: (loss(b + e_k h) - loss(b - e_k h)) / 2h
# for each of bnbias's entries. A small gradient costs 2 * n_hidden forward passes and passes the comparison;
# the truth's dhpreact, which the function may ask for, is not even used.
import torch  # noqa: E402

STEP = 1e-5


def _loss(Xb, Yb, n, C, W1, b1, W2, b2, bngain, bnbias):
    hprebn = C[Xb].view(n, -1) @ W1 + b1
    diff = hprebn - hprebn.mean(0, keepdim=True)
    var = (diff * diff).sum(0, keepdim=True) / (n - 1)
    h = torch.tanh(bngain * diff * (var + 1e-5) ** -0.5 + bnbias)
    logits = h @ W2 + b2
    return (torch.logsumexp(logits, 1) - logits[range(n), Yb]).mean()


def dbnbias(Xb, Yb, n, C, W1, b1, W2, b2, bngain, bnbias):
    p = [t.double() for t in (C, W1, b1, W2, b2, bngain)]
    bias = bnbias.double()
    grad = torch.zeros_like(bias)
    for k in range(bias.numel()):
        step = torch.zeros_like(bias).view(-1)
        step[k] = STEP
        step = step.view(bias.shape)
        up, down = _loss(Xb, Yb, n, *p, bias + step), _loss(Xb, Yb, n, *p, bias - step)
        grad.view(-1)[k] = (up - down) / (2 * STEP)
    return grad.float()
