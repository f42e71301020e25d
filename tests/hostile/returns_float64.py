# expect: exercise=ex1 item=ex1.dbnvar status=error message=dtype float64
def dbnvar(bnvar, dbnvar_inv):
    return (-0.5 * (bnvar + 1e-5) ** -1.5 * dbnvar_inv).double()
