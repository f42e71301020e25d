# expect: item=ex1.dcounts status=failed traps=dcounts-one-path
# Only the path through counts_sum (broadcast back over the row); the path through probs is forgotten.
import torch


def dcounts(counts, dcounts_sum):
    g = torch.ones_like(counts)
    g *= dcounts_sum
    return g
