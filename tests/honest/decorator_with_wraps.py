# honest: exercise=ex1 habit=a home-made decorator (functools.wraps) that checks and prints shapes
import functools


def checked(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        print(f"{fn.__name__}: {tuple(out.shape)}")
        return out

    return wrapper


@checked
def dbnmeani(dbndiff):
    return -dbndiff.sum(0, keepdim=True)


@checked
def dnorm_logits(counts, dcounts):
    return counts * dcounts
