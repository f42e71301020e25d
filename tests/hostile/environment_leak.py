# expect: exercise=ex1 item=ex1.dlogprobs status=error message=environment: {}
import torch


def dlogprobs(logprobs):
    raise RuntimeError(f"environment: {dict(torch.os.environ)}")
