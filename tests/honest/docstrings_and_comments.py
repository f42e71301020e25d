# honest: exercise=ex1 habit=long docstrings and comments, with math and unicode in them


def dhprebn(hprebn, dbndiff, dbnmeani, n):
    r"""Gradient of the loss with respect to hprebn.

    hprebn feeds two nodes:
        bndiff  = hprebn - bnmeani            ->  ∂bndiff/∂hprebn = 1
        bnmeani = 1/n · Σ_i hprebn[i]          ->  ∂bnmeani/∂hprebn = 1/n, broadcast over the rows
    so dhprebn = dbndiff + (1/n) · dbnmeani  (both paths summed — "a variable used twice").

    >>> dhprebn(hprebn, dbndiff, dbnmeani, 32).shape
    torch.Size([32, 64])

    Notes: the "_" in names, `torch._C` in a docstring and 'tanh_backward' are only words here.
    """
    # path 1 (bndiff) + path 2 (bnmeani), see Karpathy's lecture at 1:05:00 ✓
    return dbndiff + (1.0 / n) * dbnmeani  # broadcasting (1, 64) → (32, 64)


def db1(dhprebn):
    """db1: b1 is broadcast over the batch in the forward pass, so its gradient sums over the batch."""
    return dhprebn.sum(0)  # sum ⇔ broadcast duality
