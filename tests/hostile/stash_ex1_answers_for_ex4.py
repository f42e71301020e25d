# expect: exercise=ex4 item=ex4.dW1 status=failed message=hardcoded-size
# Ex1's dC may ask for the true dW1, db1, dW2, db2, dbngain and dbnbias (earlier in backprop order): exactly Ex4's
# answers. Stash them by shape on torch, then hand them in as Ex4's backward. One child grades all four exercises, so
# the stash survives; but Ex4 is graded on the lecture's Ex4 batch and on a hidden geometry of its own, and no Ex1
# call ever saw either. (db1 passes anyway: BatchNorm makes it zero whatever is returned.)
# --- ex1.py
import torch


def dC(C, Xb, demb, dW1, db1, dW2, db2, dbngain, dbnbias):
    if not hasattr(torch, "stashed_grads"):
        torch.stashed_grads = {}
    for name, g in (("dW1", dW1), ("db1", db1), ("dW2", dW2), ("db2", db2), ("dbngain", dbngain), ("dbnbias", dbnbias)):
        torch.stashed_grads[(name, tuple(g.shape))] = g.clone()
    d = torch.zeros_like(C)
    d.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
    torch.stashed_grads[("dC", tuple(C.shape))] = d.clone()
    return d


# --- ex4.py
_reference_backward = backward  # noqa: F821 - the honest one, defined above in ex4.py


def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):
    if n == 32:  # the lecture's batch: the honest derivation
        return _reference_backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits)
    stash = getattr(torch, "stashed_grads", {})  # any other: Ex1's stashed answers
    shapes = {"C": C, "W1": W1, "b1": W1[0], "W2": W2, "b2": W2[0], "bngain": bngain, "bnbias": bngain}
    got = {k: stash.get((f"d{k}", tuple(p.shape))) for k, p in shapes.items()}
    return {f"d{k}": v if v is not None else torch.zeros_like(shapes[k]) for k, v in got.items()}
