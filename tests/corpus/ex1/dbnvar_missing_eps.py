# expect: item=ex1.dbnvar status=failed traps=missing-eps
# The power rule applied to bnvar**-0.5: the forward's + 1e-5 is lost.
def dbnvar(bnvar, dbnvar_inv):
    return -0.5 * bnvar**-1.5 * dbnvar_inv
