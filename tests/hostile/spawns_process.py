# expect: exercise=ex1 item=ex1.dlogprobs status=error message=Operation not permitted
import torch


def dlogprobs(logprobs):
    torch.os.fork()
    return torch.zeros_like(logprobs)
