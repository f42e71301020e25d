# expect: item=ex3.dhprebn status=passed traps=
# Written with bndiff and the variance's gradient, summing the direct, variance and mean paths.
def dhprebn(dhpreact, bngain, bndiff, bnvar_inv, n):
    dbnraw = bngain * dhpreact
    dvar = -0.5 * bnvar_inv**3 * (dbnraw * bndiff).sum(0, keepdim=True)
    direct = dbnraw * bnvar_inv + 2.0 / (n - 1) * bndiff * dvar
    return direct - direct.mean(0, keepdim=True)
