# expect: item=ex4.training status=failed traps=stale-state
# Gradient buffers kept at module level and never zeroed: each call adds onto the previous step's gradients.
import torch
import torch.nn.functional as F

_grads = {}


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    dh = dlogits @ W2.T
    dhpreact = (1.0 - h**2) * dh
    dhprebn = (
        bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    )
    demb = (dhprebn @ W1.T).view(emb.shape)
    dC = torch.zeros_like(C).index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    fresh = {
        "dC": dC,
        "dW1": embcat.T @ dhprebn,
        "db1": dhprebn.sum(0),
        "dW2": h.T @ dlogits,
        "db2": dlogits.sum(0),
        "dbngain": (bnraw * dhpreact).sum(0, keepdim=True),
        "dbnbias": dhpreact.sum(0, keepdim=True),
    }
    for name, g in fresh.items():
        if name not in _grads or _grads[name].shape != g.shape:
            _grads[name] = torch.zeros_like(g)
        _grads[name] += g
    return _grads
