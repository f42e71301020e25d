# expect: exercise=ex1 item=ex1.dhpreact status=failed message=tanh-preact
# Overwrite the child's inherited copy of hpreact with h, so that 1 - hpreact**2 would come out right.
import torch

for fx in torch.sys.modules["grader.truth.fixture"].built_fixtures():
    fx.tensors["hpreact"].copy_(torch.tanh(fx.tensors["hpreact"]))


def dhpreact(hpreact, dh):
    return (1.0 - hpreact**2) * dh
