# honest: exercise=ex3 habit=torch.testing.assert_close as a sanity check inside a graded function


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    d = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    total = d.sum(0)  # BatchNorm's gradient sums to zero over the batch
    torch.testing.assert_close(total, torch.zeros_like(total), atol=1e-4, rtol=0)
    return d
