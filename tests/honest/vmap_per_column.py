# honest: exercise=ex1 habit=torch.func.vmap to vectorise a per-column dot product (vmap differentiates nothing)
from torch.func import vmap


def dbngain(bnraw, dhpreact):
    return vmap(torch.dot)(bnraw.T, dhpreact.T).unsqueeze(0)  # one dot product per hidden unit
