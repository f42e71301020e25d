# expect: item=ex3.dhprebn status=failed traps=mean-divisor
# The batch mean's term divided by n-1, the variance's divisor.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    g = bngain * dhpreact
    return bnvar_inv * (g - g.sum(0, keepdim=True) / (n - 1) - bnraw * (g * bnraw).sum(0, keepdim=True) / (n - 1))
