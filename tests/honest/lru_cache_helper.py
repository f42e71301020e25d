# honest: exercise=ex1 habit=functools.lru_cache and functools.cache on helpers
import functools
from functools import lru_cache


@lru_cache(maxsize=None)
def mean_factor(n):
    return 1.0 / n


@functools.cache
def ones_shape(rows: int, cols: int) -> tuple:
    return (rows, cols)


def dhprebn(hprebn, dbndiff, dbnmeani, n):
    ones = torch.ones(ones_shape(*hprebn.shape))
    return dbndiff + mean_factor(n) * ones * dbnmeani
