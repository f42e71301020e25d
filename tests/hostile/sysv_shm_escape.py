# expect: exercise=ex1 item=ex1.dlogprobs status=error message=shmget failed
# scan: evaded
# Ask for 3 GiB of SysV shared memory, which rlimits do not count and which outlives the process.
import torch


def dlogprobs(logprobs):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None)
    libc.shmget.restype = ctypes.c_int
    seg = libc.shmget(0, ctypes.c_size_t(3 << 30), 0o1600)
    if seg < 0:
        raise RuntimeError("shmget failed")
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(seg, None, 0)
    ctypes.memset(addr, 1, 3 << 30)
    return torch.zeros_like(logprobs)
