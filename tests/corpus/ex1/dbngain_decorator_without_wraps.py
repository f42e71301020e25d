# expect: item=ex1.dbngain status=error traps=
# A decorator without functools.wraps hides the parameters behind (*args, **kw): nothing can be bound by name.
import torch


def logged(f):
    def inner(*args, **kw):
        return f(*args, **kw)

    return inner


@logged
def dbngain(bnraw, dhpreact):
    return (bnraw * dhpreact).sum(0, keepdim=True)
