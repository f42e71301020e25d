# honest: exercise=ex1 habit=import sys and types at the top: stderr prints, sys.path, SimpleNamespace
import sys
from sys import stderr, version_info
from types import SimpleNamespace
import types

sys.path.append("..")  # the notebook's habit, to reach a helper folder
assert version_info >= (3, 8) and sys.version_info.major == 3
sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
EPS = SimpleNamespace(bn=1e-5)
CONFIG = types.SimpleNamespace(verbose=False)


def dlogit_maxes(dnorm_logits):
    out = -dnorm_logits.sum(1, keepdim=True)
    if CONFIG.verbose:
        print("dlogit_maxes", tuple(out.shape), file=sys.stderr)
    return out


def dhpreact(h, dh):
    print("dhpreact from dh of shape", tuple(dh.shape), file=stderr)
    sys.stdout.flush()
    return (1.0 - h**2) * dh


def dbnvar(bnvar, dbnvar_inv):
    return (-0.5 * (bnvar + EPS.bn) ** -1.5) * dbnvar_inv
