# honest: exercise=ex1 habit=asserts on shapes, dtypes and values (torch.allclose, torch.equal)


def dcounts(counts, counts_sum_inv, dprobs, dcounts_sum):
    assert counts.shape == dprobs.shape, (counts.shape, dprobs.shape)
    assert counts_sum_inv.shape == (counts.shape[0], 1)
    d = counts_sum_inv * dprobs + dcounts_sum
    assert d.shape == counts.shape, f"dcounts has shape {d.shape}, expected {counts.shape}"
    assert d.dtype == torch.float32 and not d.isnan().any()
    assert d.ndim == 2 and d.size(0) == counts.size(0) and d.numel() == counts.numel()
    return d


def dnorm_logits(counts, dcounts):
    d = counts * dcounts
    assert torch.equal(d, dcounts * counts)
    assert torch.allclose(d, counts.mul(dcounts))
    assert torch.isfinite(d).all(), "non-finite gradient"
    return d
