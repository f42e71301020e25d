# expect: item=ex3.dhprebn status=failed traps=reduced-wrong-dim
# The mean form with the batch mean taken over dim 1; the variance's term is right.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    g = bngain * dhpreact
    return bnvar_inv * (g - g.mean(1, keepdim=True) - bnraw * (g * bnraw).sum(0, keepdim=True) / (n - 1))
