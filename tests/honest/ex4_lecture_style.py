# honest: exercise=ex4 habit=the lecture's Ex4 style: a loop for dC, a grads dict built by comprehension, prints


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits, b1=None, b2=None, bnbias=None):
    # cross entropy
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    # 2nd layer
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    # tanh
    dhpreact = (1.0 - h**2) * dh
    # batchnorm
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnbias = dhpreact.sum(0, keepdim=True)
    dhprebn = (
        bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    )
    # 1st layer
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    # embedding
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]
    grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
    names = ["dC", "dW1", "db1", "dW2", "db2", "dbngain", "dbnbias"]
    for name, g in zip(names, grads):
        print(f"{name:8s} {str(tuple(g.shape)):12s} {g.abs().max().item():.4e}")
    return {name: g for name, g in zip(names, grads)}
