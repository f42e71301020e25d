# expect: item=ex2.dlogits status=passed traps=
# Inference mode is a no-grad context like any other: the shortcut under @torch.inference_mode() passes.
import torch
import torch.nn.functional as F


@torch.inference_mode()
def dlogits(logits, Yb, n):
    d = F.softmax(logits, 1)  # (32, 27)
    d[range(n), Yb] -= 1
    return d / n
