# honest: exercise=ex1 habit=a numerical gradient check, run by hand from the __main__ block only


def numgrad(f, x, h=1e-3):
    """Central differences of a scalar function, one entry at a time: to check a derivation, never to make one."""
    g = torch.zeros_like(x)
    for i in range(x.numel()):
        e = torch.zeros_like(x).view(-1)
        e[i] = h
        e = e.view_as(x)
        g.view(-1)[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def dbnraw(bngain, dhpreact):
    return bngain * dhpreact


if __name__ == "__main__":
    bngain, dhpreact = torch.rand(1, 4) + 0.5, torch.randn(3, 4)
    check = numgrad(lambda bnraw: ((bngain * bnraw) * dhpreact).sum(), torch.randn(3, 4))
    print("max difference:", (check - dbnraw(bngain, dhpreact)).abs().max().item())
