# honest: exercise=ex1 habit=global constants (EPS = 1e-5, BESSEL, a global counter)

EPS = 1e-5
BESSEL = True
CALLS = 0
VERBOSE = False


def dbnvar(bnvar, dbnvar_inv):
    global CALLS
    CALLS += 1
    if VERBOSE:
        print("call", CALLS)
    return -0.5 * (bnvar + EPS) ** -1.5 * dbnvar_inv


def dbndiff2(bndiff2, dbnvar, n):
    factor = 1.0 / (n - 1) if BESSEL else 1.0 / n
    return factor * torch.ones_like(bndiff2) * dbnvar
