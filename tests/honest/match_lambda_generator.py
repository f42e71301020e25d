# honest: exercise=ex1 habit=match statements on shapes, lambdas, generators, try/except fallbacks

negate = lambda t: -t  # noqa: E731


def _rows(t):
    for i in range(t.shape[0]):
        yield t[i]


def dbnmeani(dbndiff):
    match dbndiff.shape:
        case (n, h):
            total = torch.zeros(1, h)
            for row in _rows(dbndiff):
                total += negate(row)
            return total
        case _:
            raise ValueError(f"unexpected shape {dbndiff.shape}")


def dbnraw(bngain, dhpreact):
    try:
        scale = bngain.expand_as(dhpreact)
    except RuntimeError:
        scale = bngain
    return scale * dhpreact
