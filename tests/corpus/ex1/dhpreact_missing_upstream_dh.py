# expect: item=ex1.dhpreact status=failed traps=missing-factor
# tanh's local derivative alone: the chain rule's other factor, the upstream dh, is dropped.
import torch


def dhpreact(h, dh):
    return 1.0 - h**2  # (32, 64)
