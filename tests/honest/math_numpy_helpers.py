# honest: exercise=ex1 habit=math and numpy helpers (math.prod, math.sqrt, np.prod, np.float32 constants)
import math

import numpy as np

HALF = np.float32(0.5)


def _numel(shape):
    return math.prod(shape)


def demb(emb, dembcat):
    assert _numel(emb.shape) == int(np.prod(dembcat.shape))
    return dembcat.reshape(emb.shape)


def dbnvar(bnvar, dbnvar_inv):
    root = torch.sqrt(bnvar + 1e-5)
    assert math.isclose(math.sqrt(4.0), 2.0)
    return -float(HALF) / (root * root * root) * dbnvar_inv
