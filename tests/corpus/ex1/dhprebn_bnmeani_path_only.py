# expect: item=ex1.dhprebn status=failed traps=dhprebn-one-path
# Only the path through bnmeani; the direct path through bndiff is forgotten.
import torch


def dhprebn(hprebn, dbnmeani, n):
    return torch.ones_like(hprebn) * dbnmeani / n
