# honest: exercise=ex1 habit=returning views: .T of a product, expand_as, broadcast_to, non-contiguous slices


def dh(W2, dlogits):
    return (W2 @ dlogits.T).T  # a transposed view, not contiguous


def dbndiff2(bndiff2, dbnvar, n):
    return (dbnvar / (n - 1)).expand_as(bndiff2)  # stride 0 along the batch


def dcounts_sum_inv(counts, dprobs):
    both = torch.cat([counts * dprobs, counts * dprobs], dim=1)
    return both[:, : counts.shape[1]].sum(1, keepdim=True)


def dbnbias(dhpreact):
    return torch.broadcast_to(dhpreact.sum(0), (1, dhpreact.shape[1]))


def demb(emb, dembcat):
    return dembcat.view(emb.shape[0], emb.shape[1], emb.shape[2])
