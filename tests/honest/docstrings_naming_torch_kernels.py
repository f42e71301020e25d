# honest: exercise=ex1 habit=docstrings that name torch's own kernels and internals while explaining the formula
def dhpreact(h, dh):
    """Same formula as PyTorch's tanh_backward: (1 - h**2) * dh, with h = tanh(hpreact)."""
    return (1 - h**2) * dh


def dbnvar_inv(bndiff, dbnraw):
    """The hint in torch._C's native_batch_norm_backward does not apply here: this is one step of the chain."""
    return (bndiff * dbnraw).sum(0, keepdim=True)
