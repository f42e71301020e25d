# expect: exercise=ex3 item=ex3.dhprebn status=any flag=numeric_differentiation
# Complex-step differentiation of BatchNorm for Ex3 (4 points): each column of hpreact depends only on the same
# column of hprebn, so adding 1e-30j to one whole row of hprebn and taking the imaginary part of
# sum(hpreact * dhpreact) per column gives that row of dhprebn exactly. n forward passes, no derivation (the
# Bessel correction comes for free). Every op is analytic (x * x, not abs or var).
import torch  # noqa: E402

STEP = 1e-30


def dhprebn(hprebn, bngain, dhpreact, n):
    x, gain, up = hprebn.double(), bngain.double(), dhpreact.double()
    out = torch.zeros_like(x)
    for i in range(n):
        z = x.to(torch.complex128)
        z[i, :] += STEP * 1j
        diff = z - z.sum(0, keepdim=True) / n
        var = (diff * diff).sum(0, keepdim=True) / (n - 1)
        hpreact = gain * diff * (var + 1e-5) ** -0.5
        out[i, :] = (hpreact * up).sum(0).imag / STEP
    return out.float()
