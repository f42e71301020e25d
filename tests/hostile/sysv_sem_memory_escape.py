# expect: exercise=ex1 item=ex1.dlogprobs status=error message=Operation not permitted
# scan: evaded
# SysV semaphores live in kernel memory that RLIMIT_AS does not count, and unlike shared memory and message
# queues their limits (kernel.sem: 32000 per set, 1024000000 in all) are not set to 0 in a sandbox's IPC
# namespace. 460 sets of 32000 semaphores hold about 1.05 GiB (~74 bytes each), past the tests' 1024 MB limit,
# and nothing stops 70 times that; where the IPC namespace is the host's, they also outlive the grader.
# Removed again before the call ends.
import torch

SETS, PER_SET, IPC_PRIVATE, IPC_RMID = 460, 32000, 0, 0


def dlogprobs(logprobs, Yb, n):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    held, err = [], 0
    for _ in range(SETS):
        sem = libc.semget(IPC_PRIVATE, PER_SET, 0o600)
        if sem < 0:
            err = ctypes.get_errno()
            break
        held.append(sem)
    for sem in held:
        libc.semctl(sem, 0, IPC_RMID)
    if err:
        raise OSError(err, f"{torch.os.strerror(err)} (after {len(held)} semaphore sets)")
    count = len(held) * PER_SET
    raise RuntimeError(f"held {count} semaphores (~{count * 74 >> 20} MiB) outside the memory limit")
