# expect: exercise=ex1 item=ex1.dh status=error message=exited with code 3
import torch


def dh(dlogits, W2):
    torch.os._exit(3)
