# expect: exercise=ex2 item=ex2.dlogits status=failed message=uses-autograd
# torch.ops.aten's own set_grad_enabled / requires_grad_ / grad reach the engine past every Python tripwire,
# and put grad mode back before returning.
import torch
import torch.nn.functional as F


def dlogits(logits, Yb):
    torch.ops.aten.set_grad_enabled(True)
    x = torch.ops.aten.requires_grad_(logits.clone())
    g = torch.ops.aten.grad([F.cross_entropy(x, Yb)], [x])[0]
    torch.ops.aten.set_grad_enabled(False)
    return g
