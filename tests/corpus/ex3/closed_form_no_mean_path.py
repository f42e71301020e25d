# expect: item=ex3.dhprebn status=failed traps=dhprebn-one-path
# The -dhpreact.sum(0) term (the path through the mean) is missing.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    return bngain * bnvar_inv / n * (n * dhpreact - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
