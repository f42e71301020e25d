# expect: exercise=ex2 item=ex2.dlogits status=failed message=uses-autograd
# torch's log_softmax backward kernel inside inference mode, which skips the autograd dispatch key where the
# kernel hooks sit: in a sandbox, torch.inference_mode is no_grad, so the hook still sees the call.
import torch
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    dlogprobs = torch.zeros_like(logits)
    dlogprobs[range(n), Yb] = -1.0 / n
    with torch.inference_mode():
        return torch._log_softmax_backward_data(dlogprobs, F.log_softmax(logits, 1), 1, logits.dtype).clone()
