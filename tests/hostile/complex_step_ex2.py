# expect: exercise=ex2 item=ex2.dlogits status=any flag=numeric_differentiation
# Complex-step differentiation, no calculus: run the forward pass (per-row cross-entropy) on complex logits
# with 1e-30j added to one column, and the imaginary part of each row's loss divided by 1e-30 is that row's
# derivative, exact to the last bit (no cancellation, unlike finite differences). 27 forward passes give
# dlogits on any geometry. Nothing here is autograd, nothing is private: only a numeric-differentiation check
# (a flag for the instructor) would see it.
import torch  # noqa: E402

STEP = 1e-30


def dlogits(logits, Yb, n):
    x = logits.double()
    shift = x.max(1, keepdim=True).values  # a real constant: softmax does not see it
    out = torch.zeros_like(x)
    for j in range(x.shape[1]):
        z = x.to(torch.complex128)
        z[:, j] += STEP * 1j
        row_loss = shift.squeeze(1) + torch.log(torch.exp(z - shift).sum(1)) - z[range(n), Yb]
        out[:, j] = row_loss.imag / STEP / n
    return out.float()
