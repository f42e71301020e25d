# expect: item=ex3.dhprebn status=failed traps=reduced-wrong-dim
# Both sums over dim 1 with keepdim=True: (n, 1) still broadcasts, so nothing raises.
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    s = dhpreact.sum(1, keepdim=True)
    p = (dhpreact * bnraw).sum(1, keepdim=True)
    return bngain * bnvar_inv / n * (n * dhpreact - s - n / (n - 1) * bnraw * p)
