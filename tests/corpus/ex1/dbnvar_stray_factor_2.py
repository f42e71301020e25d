# expect: item=ex1.dbnvar status=failed traps=scaled
# The power rule's 1/2 is lost: twice the true gradient.
def dbnvar(bnvar, dbnvar_inv):
    return -((bnvar + 1e-5) ** -1.5) * dbnvar_inv
