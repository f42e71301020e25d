# honest: exercise=ex1 habit=a functools.wraps decorator around functions whose parameters are positional-only
import functools


def shape_checked(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        out = fn(*args)
        assert out.shape == args[0].shape or out.ndim == 2, fn.__name__
        return out

    return wrapper


@shape_checked
def dcounts_sum(counts_sum, dcounts_sum_inv, /):
    return -(counts_sum**-2) * dcounts_sum_inv  # (32, 1)


@shape_checked
def dh(dlogits, W2, /):
    return dlogits @ W2.T  # (32, 64)
