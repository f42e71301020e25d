# expect: item=ex3.dhprebn status=failed traps=scaled
# The closed form's 1/n in front written as 1/(n-1).
def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    return bngain * bnvar_inv / (n - 1) * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
