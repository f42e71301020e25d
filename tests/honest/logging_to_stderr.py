# honest: exercise=ex3 habit=logging.getLogger(...).info/warning to stderr
import logging

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger(__name__)


def dhprebn(dhpreact, bngain, bnvar_inv, bnraw, n):
    log.info("dhprebn: n=%d, dhpreact %s", n, tuple(dhpreact.shape))
    d = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    if d.abs().max() > 1.0:
        log.warning("large gradient: %.3g", d.abs().max().item())
    logging.debug("done")
    return d
