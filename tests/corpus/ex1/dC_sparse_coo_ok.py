# expect: item=ex1.dC status=passed traps=
# The layout nn.Embedding(sparse=True) gives: coalesce sums the repeated rows, so the values are right.
import torch


def dC(C, Xb, demb):
    rows = Xb.reshape(1, -1)  # (1, 96)
    return torch.sparse_coo_tensor(rows, demb.reshape(-1, C.shape[1]), C.shape).coalesce()  # (27, 10), sparse
