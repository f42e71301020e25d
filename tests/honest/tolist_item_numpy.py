# honest: exercise=ex1 habit=.tolist() .item() .numpy() round trips
import numpy as np


def dlogprobs(logprobs, Yb, n):
    rows = int(torch.tensor(n).item())
    labels = Yb.tolist()
    d = torch.zeros_like(logprobs)
    for i, y in enumerate(labels):
        d[i, y] = -1.0 / rows
    return d


def db2(dlogits):
    as_list = dlogits.sum(0).tolist()
    return torch.tensor(as_list, dtype=dlogits.dtype)


def dbnbias(dhpreact):
    summed = dhpreact.numpy().sum(axis=0, keepdims=True)
    return torch.from_numpy(np.ascontiguousarray(summed))


def dcounts_sum(counts_sum, dcounts_sum_inv):
    arr = np.asarray(counts_sum)
    return torch.as_tensor(-(arr**-2.0)) * dcounts_sum_inv
