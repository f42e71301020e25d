# expect: item=ex3.dhprebn status=failed traps=mutates-input
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    dhpreact *= bngain
    s = dhpreact.sum(0)
    p = (dhpreact * bnraw).sum(0)
    return bnvar_inv / n * (n * dhpreact - s - n / (n - 1) * bnraw * p)
