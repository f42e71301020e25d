# expect: exercise=ex3 item=ex3.dhprebn status=failed message=uses-autograd
# Forward-mode AD: one dual-number pass per column would give the Jacobian without any backward().
import torch
import torch.autograd


def dhprebn(hprebn, bngain, bnbias, dhpreact):
    fwd = torch.autograd.forward_ad
    with fwd.dual_level():
        x = fwd.make_dual(hprebn, torch.ones_like(hprebn))
        out = bngain * (x - x.mean(0, keepdim=True)) * (x.var(0, keepdim=True) + 1e-5) ** -0.5 + bnbias
        tangent = fwd.unpack_dual(out).tangent
    return tangent * dhpreact
