# expect: exercise=ex1 item=ex1.dprobs status=error message=SIGSEGV
# scan: evaded
import torch


def dprobs(probs, dlogprobs):
    torch.sys.modules["ctypes"].string_at(0)
