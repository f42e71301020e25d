# expect: item=ex3.dhprebn status=failed traps=hardcoded-size
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - 32 / 31 * bnraw * (dhpreact * bnraw).sum(0))
