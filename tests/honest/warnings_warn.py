# honest: exercise=ex2 habit=warnings.warn inside a graded function
import warnings


def dlogits(logits, Yb, n):
    if n < 2:
        warnings.warn("a batch of one example", RuntimeWarning)
    warnings.warn(f"dlogits computed for a batch of {n}", UserWarning, stacklevel=2)
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    return d / n
