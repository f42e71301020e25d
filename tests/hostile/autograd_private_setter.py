# expect: exercise=ex3 item=ex3.dhprebn status=failed message=uses-autograd
import torch


def dhprebn(hprebn, bngain, bnbias, dhpreact):
    torch._C._set_grad_enabled(True)
    x = torch.ones_like(hprebn, requires_grad=True) * hprebn
    mean = x.mean(0, keepdim=True)
    var = x.var(0, keepdim=True)
    out = bngain * (x - mean) * (var + 1e-5) ** -0.5 + bnbias
    from torch.autograd.variable import Variable

    (g,) = Variable._execution_engine.run_backward((out,), (dhpreact,), False, False, (x,), False)
    return g
