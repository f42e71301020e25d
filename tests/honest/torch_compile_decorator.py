# honest: exercise=ex2 habit=@torch.compile on the gradient, @torch.compiler.disable on a helper (run eagerly: same values)
@torch.compile
def dlogits(logits, Yb, n):
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    return d / n


@torch.compile(mode="reduce-overhead", fullgraph=True)
def _helper_never_graded(x):
    return x


@torch.compiler.disable
def _another_helper(x):
    return x
