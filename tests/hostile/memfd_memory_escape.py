# expect: exercise=ex1 item=ex1.dlogprobs status=error message=Operation not permitted
# memfd pages are not counted by RLIMIT_AS: hold 1.5 GiB outside the sandbox's memory limit.
import torch


def dlogprobs(logprobs, Yb, n):
    os = torch.os
    chunk = b"\x01" * (4 << 20)
    for _ in range(384):
        fd = os.memfd_create("x")
        os.write(fd, chunk)
    d = torch.zeros_like(logprobs)
    d[range(n), Yb] = -1.0 / n
    return d
