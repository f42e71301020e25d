# expect: exercise=ex1 item=ex1.dbnraw status=error message=Ran out of memory
import torch


def dbnraw(bngain, dhpreact):
    hog = torch.ones(3 * 2**30)  # 12 GB
    return hog.sum() * bngain * dhpreact
