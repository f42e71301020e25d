# expect: exercise=ex1 item=ex1.dlogprobs status=error message=no trap text in this sandbox
# A course at level diagnose must never show hint or full texts: copy them out of the grader's own tables.
import torch


def dlogprobs(logprobs, Yb, n):
    traps = torch.sys.modules.get("grader.grading.traps")
    if traps is None:
        raise RuntimeError("stale case: grader.grading.traps is not loaded in the sandbox")
    found = []
    for trap in traps.TRAPS.values():
        found += [t for t in (trap.hint, trap.explain, trap.concept) if isinstance(t, str) and t]
    if found:
        raise RuntimeError("leaked: " + found[0][:200])
    raise RuntimeError("no trap text in this sandbox")
