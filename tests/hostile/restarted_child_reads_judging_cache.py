# expect: exercise=ex1 item=ex1.dcounts_sum_inv status=error message=judging cache: no truth
# Crash one call, so the next runs in a child forked after judging began; then read what the parent's
# comparison keeps per truth (atol + |rtol * truth|) through the module, and report whether any value survived.
import torch


def dprobs(probs, dlogprobs):
    torch.sys.modules["os"]._exit(1)


def dcounts_sum_inv(counts, dprobs):
    cache = getattr(torch.sys.modules.get("grader.grading.compare"), "_ALLOWED", {})
    alive = [a for _, _, a in cache.values() if a is not None and a.numel() and bool((a != 0).any())]
    raise RuntimeError(f"judging cache: {'no truth' if not alive else f'{len(alive)} truths readable'}")
