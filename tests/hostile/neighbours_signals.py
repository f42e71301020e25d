# expect: exercise=ex1 item=ex1.dlogprobs status=error message=Operation not permitted
import torch


def dlogprobs(logprobs):
    os = torch.os
    for pid in range(2, 4096):  # SIGSTOP, priority and CPU affinity on every pid that might be a neighbour
        if pid == os.getpid():  # itself: without a PID namespace its own pid may be in range, and stopping
            continue  # itself is allowed (it only costs its own item); the neighbours are what this is about
        for attempt in (
            lambda: os.kill(pid, 19),
            lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),
            lambda: os.sched_setaffinity(pid, {0}),
        ):
            try:
                attempt()
            except Exception:
                pass
    for attempt in (lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19), lambda: os.kill(-1, 19)):
        try:
            attempt()
        except Exception:
            pass
    os.kill(-1, 9)  # every process this uid can see
    return torch.zeros_like(logprobs)
