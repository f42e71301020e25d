# expect: item=ex3.dhprebn status=failed traps=missing-factor
# The closed form without the 1/std in front.
def dhprebn(dhpreact, bngain, bnraw, n):
    return bngain / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
