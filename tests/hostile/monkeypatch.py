# expect: exercise=ex1 item=ex1.dcounts status=failed message=differ
import torch

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)


def dcounts(counts):
    return torch.zeros_like(counts)
