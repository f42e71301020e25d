# expect: item=ex1.dcounts status=passed traps=
import torch


def dcounts(counts, counts_sum_inv, dprobs, dcounts_sum):
    g = torch.zeros_like(counts)
    g += counts_sum_inv * dprobs
    g += dcounts_sum
    return g
