# honest: exercise=ex1 habit=getattr with a literal name and a default, setattr of a plain attribute
class _Stats:
    pass


STATS = _Stats()


def dbnvar(bnvar, dbnvar_inv):
    eps = getattr(STATS, "eps", 1e-5)  # the lecture's epsilon, unless a test set another
    setattr(STATS, "calls", getattr(STATS, "calls", 0) + 1)
    return -0.5 * (bnvar + eps) ** -1.5 * dbnvar_inv
