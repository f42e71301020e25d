# honest: exercise=ex1 habit=@torch.compile on a gradient, @torch.compiler.disable on a helper (run eagerly: same values)
@torch.compile
def dcounts_sum(counts_sum, dcounts_sum_inv):
    return -(counts_sum**-2) * dcounts_sum_inv


@torch.compile(mode="reduce-overhead", fullgraph=True)
def dnorm_logits(counts, dcounts):
    return _times(counts, dcounts)


@torch.compiler.disable
def _times(a, b):
    return a * b
