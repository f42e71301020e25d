# honest: exercise=ex1 habit=torch.manual_seed and a torch.Generator inside a function


def db1(dhprebn):
    torch.manual_seed(42)
    perm = torch.randperm(dhprebn.shape[0])  # the order of the rows does not change their sum
    return dhprebn[perm].sum(0)


def dhpreact(h, dh):
    g = torch.Generator().manual_seed(2147483647)
    noise = torch.randn(h.shape, generator=g)
    return (1.0 - h**2) * dh + 0.0 * noise
