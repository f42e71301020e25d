# honest: exercise=ex4 habit=printing numpy arrays made from tensors (np.set_printoptions, repr, numpy scalars)
import numpy as np

np.set_printoptions(precision=4, suppress=True)
torch.set_printoptions(precision=4, linewidth=120)


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    a = dlogits.numpy()
    print(a)
    print(a[:3], a.shape, a.dtype)
    print(np.round(a.sum(1), 5), np.abs(a).max(), a.mean(0)[:4])
    print(repr(W2.numpy()[:2, :2]), np.float32(1.5), str(np.array([1, 2])))
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h**2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    dhprebn = (
        bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    )
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    dC.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    return {"dC": dC, "dW1": dW1, "db1": db1, "dW2": dW2, "db2": db2, "dbngain": dbngain, "dbnbias": dbnbias}
