# honest: exercise=ex3 habit=logging with a handler and a Formatter of its own
import logging
from logging import Formatter

handler = logging.StreamHandler()
handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
log = logging.getLogger("ex3")
log.addHandler(handler)
short = Formatter("%(message)s")


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    log.info("n=%d", n)
    return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
