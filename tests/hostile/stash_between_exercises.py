# expect: exercise=ex2 item=ex2.dlogits status=failed message=hardcoded-size
# Ex1's dh receives the true dlogits; stash each one on torch by shape, then hand it in as Ex2's answer. One child
# grades all four exercises, so the stash survives; but Ex2 is checked on a hidden geometry of its own, which no
# Ex1 call ever saw: the lecture's (public anyway) passes, the hidden one does not, and the item scores nothing.
# --- ex1.py
import torch


def dh(dlogits, W2):
    if not hasattr(torch, "stashed_dlogits"):
        torch.stashed_dlogits = {}
    torch.stashed_dlogits[tuple(dlogits.shape)] = dlogits.clone()
    return dlogits @ W2.T


# --- ex2.py


def dlogits(logits, Yb, n):
    stash = getattr(torch, "stashed_dlogits", {})
    if tuple(logits.shape) in stash:
        return stash[tuple(logits.shape)]
    return torch.zeros_like(logits)
