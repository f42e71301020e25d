# expect: item=ex3.dhprebn status=passed traps=
# Written with means: fold bngain in first, then subtract the mean and the projection on bnraw.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    g = bngain * dhpreact
    return bnvar_inv * (g - g.mean(0, keepdim=True) - bnraw * (g * bnraw).sum(0, keepdim=True) / (n - 1))
