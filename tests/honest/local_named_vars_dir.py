# honest: exercise=ex1 habit=locals named vars and dir


def dbnvar(bnvar, dbnvar_inv):
    vars = bnvar + 1e-5  # "the variances"
    dir = -1.0  # the sign of the exponent's derivative
    return dir * 0.5 * vars**-1.5 * dbnvar_inv


def dbnmeani(dbndiff):
    vars = [dbndiff]
    for dir in (0,):
        total = (-vars[0]).sum(dir, keepdim=True)
    return total
