# expect: item=ex3.dhprebn status=failed traps=dbndiff-one-path
# The bnraw * (dhpreact * bnraw).sum(0) term (the path through the variance) is missing.
def dhprebn(dhpreact, bngain, bnvar_inv, n):
    return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0))
