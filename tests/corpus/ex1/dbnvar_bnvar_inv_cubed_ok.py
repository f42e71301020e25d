# expect: item=ex1.dbnvar status=passed traps=
# Another algebraic form: (bnvar + eps)**-1.5 is bnvar_inv cubed, eps included.
def dbnvar(bnvar_inv, dbnvar_inv):
    return -0.5 * bnvar_inv**3 * dbnvar_inv
