# expect: exercise=ex2 item=ex2.dlogits status=any flag=numeric_differentiation
# A central difference with no loop: the loss evaluated at logits nudged along every basis direction at once
# (torch.eye over all entries), differenced and divided. The finite-difference flag wanted a loop; this scored 2/2
# with no flag at all (a red-team helper). It is still right to 7e-9, so it passes: the flag is for the instructor.
import torch
import torch.nn.functional as F


def loss(z, Yb):
    return -F.log_softmax(z, -1)[:, torch.arange(z.shape[1]), Yb].mean(-1)


def dlogits(logits, Yb, n):
    x = logits.double()
    h = 1e-4
    basis = torch.eye(x.numel(), dtype=x.dtype).view(-1, *x.shape)
    return ((loss(x + h * basis, Yb) - loss(x - h * basis, Yb)) / (2 * h)).view(x.shape).to(logits.dtype)
