# expect: item=ex1.dbngain status=passed traps=
# A dataclass with a quoted annotation: dataclasses looks the module up by name, so the file must be a module.
from dataclasses import dataclass

import torch


@dataclass
class Scale:
    factor: "float" = 1.0


def dbngain(bnraw, dhpreact):
    return Scale().factor * (bnraw * dhpreact).sum(0, keepdim=True)  # (1, 64)
