# honest: exercise=ex2 habit=str.format with a tensor's attributes, and a debug print that forgot its f prefix
# softmax minus one-hot, averaged over the batch (the same as in the lecture's case)
import torch
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    """Same as {torch.nn.functional.cross_entropy} backward, by hand."""
    d = F.softmax(logits, 1)
    print("dlogits has {d.shape[0]} rows")  # meant as an f-string: prints the braces, harms nothing
    print("{0.shape[0]} rows of {0.dtype}".format(d), "{t.shape[1]} columns".format(t=logits))
    print("{:.4f} {}".format(d.sum().item(), "{0.dtype.itemsize}".format(d)))
    d[range(n), Yb] -= 1
    return d / n
