# expect: exercise=ex1 item=ex1.dhpreact status=error message=Not run:
# Raw memory through numpy: as_strided over a one-element object array reads any address as an object
# reference, so id(f) + 16 (a function's func_globals in CPython 3.11) gives the globals of any function. The
# tripwire that replaced Tensor.backward lives in grader/sandbox/child.py: its globals hold _IN_STUDENT, the
# flag every backward-kernel hook checks. Cleared for one call, aten's own tanh_backward runs unrefused (no
# graph, so the sequence counter does not move either). Every name is built at run time. Now the scan names
# as_strided a route out (raw memory at any address): ex1.py is refused before it runs.
import numpy as np  # noqa: E402
import torch  # noqa: E402

U = chr(95)


def _object_at(address):
    cell = np.empty(1, dtype=object)
    low = (np.lib.array_utils.byte_bounds if hasattr(np.lib, "array_utils") else np.byte_bounds)(cell)[0]
    return np.lib.stride_tricks.as_strided(cell, shape=(2,), strides=(address - low,))[1]


def dhpreact(h, dh):
    sandbox = _object_at(id(torch.Tensor.backward) + 16)  # child.py's module globals
    flag = sandbox[U + "IN" + U + "STUDENT"]
    pick = sandbox[U + U + "built" + "ins" + U + U]["get" + "attr"]  # an imported module's: a dict
    kernel = pick(pick(pick(torch, "o" + "ps"), "aten"), "tanh" + U + "back" + "ward")
    flag[0] = False
    try:
        return kernel(dh, h)
    finally:
        flag[0] = True
