# expect: item=ex3.dhprebn status=failed traps=bessel
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw):
    g = bngain * dhpreact
    return bnvar_inv * (g - g.mean(0, keepdim=True) - bnraw * (g * bnraw).mean(0, keepdim=True))
