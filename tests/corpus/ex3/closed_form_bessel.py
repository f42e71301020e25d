# expect: item=ex3.dhprebn status=failed traps=bessel
# The closed form derived with the biased 1/n variance, while the forward used 1/(n-1).
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - bnraw * (dhpreact * bnraw).sum(0))
