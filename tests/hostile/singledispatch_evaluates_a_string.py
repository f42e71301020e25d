# expect: exercise=ex1 item=ex1.dhpreact status=error message=a string annotation must be a plain dotted name
# functools.singledispatch's register evaluates a string annotation with typing.get_type_hints: a string built at
# run time became a general eval (torch._C's dispatch guards, then tanh's own backward kernel). In a sandbox a
# string annotation may only be a plain dotted name.
import functools

import torch

U = chr(95)
CODE = "torch." + U + "C"


def dhpreact(h, dh):
    def probe(x: CODE):  # an annotation whose value is a run-time string
        return x

    functools.singledispatch(probe).register(probe)
    return (1.0 - h**2) * dh
