# honest: exercise=ex3 habit=getattr with a literal name and a default, setattr of a plain attribute
class _Stats:
    pass


STATS = _Stats()


def dhprebn(bngain, bnvar_inv, bnraw, dhpreact, n):
    k = getattr(bnraw, "shape", None)[0]  # the batch size, read defensively
    setattr(STATS, "calls", getattr(STATS, "calls", 0) + 1)
    return bngain * bnvar_inv / k * (k * dhpreact - dhpreact.sum(0) - k / (k - 1) * bnraw * (dhpreact * bnraw).sum(0))
