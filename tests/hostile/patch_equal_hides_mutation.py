# expect: exercise=ex1 item=ex1.dprobs status=failed message=mutates-input
import torch

torch.equal = lambda *a, **k: True
torch.Tensor.equal = lambda *a, **k: True


def dprobs(dlogprobs, probs):
    dlogprobs /= probs  # the missing .clone(): changes the caller's dlogprobs
    return dlogprobs
