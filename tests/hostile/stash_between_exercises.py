# expect: exercise=ex2 item=ex2.dlogits status=error message=AttributeError
# Ex1's dh receives the true dlogits; stash it on torch, then hand it in as Ex2's answer.
# --- ex1.py
import torch


def dh(dlogits, W2):
    torch.stashed_dlogits = dlogits.clone()
    torch.backprop_ninja_stash = dlogits.clone()
    return dlogits @ W2.T


# --- ex2.py


def dlogits(logits, Yb, n):
    return torch.stashed_dlogits
