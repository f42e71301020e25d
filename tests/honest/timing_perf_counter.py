# honest: exercise=ex4 habit=timing with time.perf_counter and time.process_time
import time


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    t0, c0 = time.perf_counter(), time.process_time()
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
    dC.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    print(f"backward took {1e3 * (time.perf_counter() - t0):.2f} ms wall, {time.process_time() - c0:.4f} s cpu")
    print("at", time.time(), time.monotonic())
    return {"dC": dC, "dW1": dW1, "db1": db1, "dW2": dW2, "db2": db2, "dbngain": dbngain, "dbnbias": dbnbias}
