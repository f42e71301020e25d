# expect: item=ex3.dhprebn status=failed traps=missing-factor
# The closed form without the gain: bngain multiplies bnraw in the forward pass.
def dhprebn(dhpreact, bnvar_inv, bnraw, n):
    return bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
