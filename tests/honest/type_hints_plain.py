# honest: exercise=ex1 habit=type hints without __future__: torch.Tensor, typing.Optional, int
from typing import List, Optional

Tensor = torch.Tensor


def dW2(h: torch.Tensor, dlogits: torch.Tensor) -> torch.Tensor:
    return h.T @ dlogits


def db2(dlogits: Tensor, scale: Optional[float] = None) -> Tensor:
    out: Tensor = dlogits.sum(0)
    return out if scale is None else out * scale


def dbnmeani(dbndiff: "torch.Tensor") -> "torch.Tensor":
    rows: List[int] = list(range(dbndiff.shape[0]))
    return -dbndiff[rows].sum(0, keepdim=True)
