# expect: item=ex1.dbnbias status=passed traps=
# functools.singledispatch with a quoted, ordinary annotation: evaluated, as it should be.
import functools

import torch


@functools.singledispatch
def total(x):
    return x.sum(0, keepdim=True)


@total.register
def _(x: "int | float"):
    return x


def dbnbias(dhpreact):
    return total(dhpreact)  # (1, 64)
