# honest: exercise=ex1 habit=torch.einsum for matrix products and sums


def dW1(embcat, dhprebn):
    return torch.einsum("ni,nj->ij", embcat, dhprebn)


def dh(W2, dlogits):
    return torch.einsum("nk,hk->nh", dlogits, W2)


def dbngain(bnraw, dhpreact):
    return torch.einsum("nh,nh->h", bnraw, dhpreact).unsqueeze(0)
