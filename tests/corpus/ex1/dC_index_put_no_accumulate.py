# expect: item=ex1.dC status=failed traps=dC-repeated-rows
# index_put_ without accumulate=True writes each row once instead of summing repeated indices.
import torch


def dC(C, Xb, demb):
    flat_ix = Xb.flatten()
    flat_g = demb.reshape(-1, C.shape[1])
    out = torch.zeros_like(C)
    out.index_put_((flat_ix,), flat_g)
    return out
