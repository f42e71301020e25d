# honest: exercise=ex1 habit=print tensors, shapes, f-strings, repr and slices inside graded functions


def dprobs(probs, dlogprobs):
    print(probs)
    print(probs.shape, probs.dtype, probs.device, probs.stride(), probs.is_contiguous())
    print(f"dlogprobs sums to {dlogprobs.sum()} and its mean is {dlogprobs.mean().item():.6f}")
    d = (1.0 / probs) * dlogprobs
    print(repr(d[:2, :5]))
    print("dprobs:", d, sep="\n")
    print(f"{d=}")
    print("max |dprobs| =", d.abs().max(), "at", d.abs().argmax())
    return d


def dW1(embcat, dhprebn):
    d = embcat.T @ dhprebn
    print(d)  # a big tensor: torch summarises it
    print(d[:, :3], d[0], d[-1, -1])
    print(f"dW1 {tuple(d.shape)} norm {d.norm():.4e}")
    print(str(d.sum(0)), format(d.max().item(), ".3g"))
    return d
