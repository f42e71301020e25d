# expect: item=ex1.dh status=passed traps=
# Parameters before a `/` cannot be passed by name: the grader passes them by position, in order.
import torch


def dh(dlogits, W2, /):
    return dlogits @ W2.T  # (32, 64)
