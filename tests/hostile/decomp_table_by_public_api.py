# expect: exercise=ex3 item=ex3.dhprebn status=error message=Not run:
# Autograd's own BatchNorm backward, by a public door: torch.export.default_decompositions() hands out the
# torch._decomp table keyed by op, so no private name is written, and the key "...native_batch_norm_backward.default"
# slipped past the backward-kernel pattern (a dot, not an underscore, after _backward). The formula is plain
# Python over ordinary ops: no kernel hook or node counter fires. It scored 4/4 with no flag (a red-team helper).
import torch

table = {str(op): fn for op, fn in torch.export.default_decompositions().items()}
batchnorm = table["aten.native_batch_norm_backward.default"]


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    scale = (n / (n - 1)) ** 0.5  # the 1/n formula made Bessel's 1/(n-1)
    ones, zeros = torch.ones(bnraw.shape[1]), torch.zeros(bnraw.shape[1])
    weight = (bngain * bnvar_inv).reshape(-1)
    return batchnorm(dhpreact, bnraw * scale, weight, None, None, zeros, ones, True, 0.0, [True, False, False])[0]
