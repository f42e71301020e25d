# honest: exercise=ex2 habit=from __future__ import annotations, typing.Optional and torch.Tensor hints
# honest-file: whole
"""Exercise 2, with type hints everywhere."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor


def _softmax(x: torch.Tensor, dim: int = 1) -> Tensor:
    return F.softmax(x, dim)


def dlogits(logits: torch.Tensor, Yb: torch.LongTensor, n: int, probs: Optional[torch.Tensor] = None) -> torch.Tensor:
    shape: Tuple[int, ...] = tuple(logits.shape)
    scale: Union[int, float] = 1 / n
    d: torch.Tensor = _softmax(logits) if probs is None else probs.clone()
    assert tuple(d.shape) == shape
    d[range(n), Yb] -= 1
    return d * scale


def check(x: list[torch.Tensor] | None = None) -> dict[str, float]:
    return {}
