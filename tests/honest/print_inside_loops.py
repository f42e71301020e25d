# honest: exercise=ex4 habit=debugging prints inside the dC loop (every lookup, and the whole dC per row)


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
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
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]
            print(k, j, ix.item(), dC[ix])
        print(f"after row {k}:\n{dC}")
    return {"dC": dC, "dW1": dW1, "db1": db1, "dW2": dW2, "db2": db2, "dbngain": dbngain, "dbnbias": dbnbias}
