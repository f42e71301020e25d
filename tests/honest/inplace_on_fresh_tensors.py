# honest: exercise=ex1 habit=in-place ops on fresh tensors (zeros_like then +=, mul_, copy_)


def dcounts(counts, counts_sum_inv, dprobs, dcounts_sum):
    d = torch.zeros_like(counts)
    d += counts_sum_inv * dprobs
    d += dcounts_sum
    return d


def dnorm_logits(counts, dcounts):
    d = torch.empty_like(counts)
    d.copy_(counts)
    d.mul_(dcounts)
    return d


def dlogits(logits, dnorm_logits, dlogit_maxes):
    d = dnorm_logits.clone()
    d[torch.arange(logits.shape[0]), logits.argmax(1)] += dlogit_maxes.view(-1)
    return d


def dC(C, Xb, demb):
    d = torch.zeros_like(C)
    d.index_add_(0, Xb.flatten(), demb.reshape(-1, C.shape[1]))
    return d
