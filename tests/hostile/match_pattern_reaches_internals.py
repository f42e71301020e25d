# expect: exercise=ex1 item=ex1.dprobs status=any flag=private_internals
# scan: evaded
# Read attributes through match class patterns and string keys, which no attribute syntax shows, to reach the
# sandbox's own modules and replace the digest that reports an input changed in place.
import torch


def _field(obj, name):
    match obj:
        case object(__globals__=g) if name == "globals":
            return g
    return None


def dprobs(dlogprobs, probs):
    builtins = _field(dprobs, "globals")["__builtins__"]
    child = _field(builtins["__import__"], "globals")
    wire = child["wire"]
    real = wire.digest
    before = {id(dlogprobs): real(dlogprobs), id(probs): real(probs)}
    wire.digest = lambda t: before.get(id(t)) or real(t)
    dlogprobs /= probs
    return dlogprobs
