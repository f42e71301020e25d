# honest: exercise=ex1 habit=helper functions and small classes with private attributes (self._saved, _cache)

_cache = {}


def _bessel(n):
    if n not in _cache:
        _cache[n] = 1.0 / (n - 1)
    return _cache[n]


class Node:
    """A small base class, as in micrograd."""

    def __init__(self, name):
        self._name = name
        self._saved = {}

    def __repr__(self):
        return f"{self.__class__.__name__}({self._name!r}, saved={sorted(self._saved)})"


class BatchNormBackward(Node):
    _count = 0

    def __init__(self, bndiff, bnvar_inv):
        super().__init__("batchnorm")
        self._saved["bndiff"] = bndiff
        self._saved["bnvar_inv"] = bnvar_inv
        self._cache = None
        BatchNormBackward._count += 1

    @property
    def saved(self):
        return self._saved

    @staticmethod
    def _sum_rows(t):
        return t.sum(0, keepdim=True)

    def _grad_var_inv(self, dbnraw):
        if self._cache is None:
            self._cache = self._sum_rows(self._saved["bndiff"] * dbnraw)
        return self._cache


def dbnvar_inv(bndiff, bnvar_inv, dbnraw):
    node = BatchNormBackward(bndiff, bnvar_inv)
    print(node)
    return node._grad_var_inv(dbnraw)


def dbndiff2(bndiff2, dbnvar, n):
    return _bessel(n) * torch.ones_like(bndiff2) * dbnvar
