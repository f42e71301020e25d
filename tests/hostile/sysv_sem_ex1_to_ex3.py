# expect: exercise=ex3 item=ex3.dhprebn status=error message=Operation not permitted
# scan: evaded
# SysV semaphores as a channel from Ex1 to Ex3 (the exercise worth 4 points): a semaphore set outlives the
# process that made it, and its values can be set and read in one call each. Ex1's dW1 receives the true
# dhprebn and stores each float's four bytes in four semaphores of a set keyed by n; Ex3's dhprebn reads the
# set of its n back and removes it. Only an IPC namespace per child stops it (semaphore limits are not 0 there).
# --- ex1.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

KEY, IPC_CREAT, SETALL = 0x77313A00, 0o1000, 17


def _fail(ctypes):
    err = ctypes.get_errno()
    raise OSError(err, torch.os.strerror(err))


_reference_dW1 = dW1  # noqa: F821 - the reference's, above in this file


def dW1(embcat, dhprebn):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    raw = np.frombuffer(dhprebn.contiguous().numpy().tobytes(), dtype=np.uint8).astype(np.uint16)
    sem = libc.semget(KEY + dhprebn.shape[0], raw.size, IPC_CREAT | 0o666)
    if sem < 0:
        _fail(ctypes)
    values = (ctypes.c_ushort * raw.size)(*raw.tolist())
    if libc.semctl(sem, 0, SETALL, values) != 0:
        _fail(ctypes)
    return _reference_dW1(embcat, dhprebn)


# --- ex3.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

KEY, GETALL, IPC_RMID = 0x77313A00, 13, 0


def dhprebn(dhpreact, n):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    sem = libc.semget(KEY + n, 0, 0)
    if sem < 0:  # EPERM where SysV IPC is refused; ENOENT in a fresh IPC namespace
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    values = (ctypes.c_ushort * (dhpreact.numel() * 4))()
    libc.semctl(sem, 0, GETALL, values)
    libc.semctl(sem, 0, IPC_RMID)  # leave nothing behind
    raw = np.array(values, dtype=np.uint16).astype(np.uint8).tobytes()
    return torch.frombuffer(bytearray(raw), dtype=torch.float32).view(dhpreact.shape).clone()
