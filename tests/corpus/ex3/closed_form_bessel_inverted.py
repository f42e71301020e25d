# expect: item=ex3.dhprebn status=failed traps=bessel-inverted
# The variance's n/(n-1) written upside down.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - (n - 1) / n * bnraw * (dhpreact * bnraw).sum(0))
