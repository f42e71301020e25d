# expect: exercise=ex2 item=ex2.dlogits status=error message=Operation not permitted
# scan: evaded
# SysV shared memory as a channel from Ex1 to Ex2: a segment outlives the process that made it. Ex1's dh
# receives the true dlogits and copies them (both geometries) into a small segment under a fixed key; Ex2's
# dlogits attaches the segment of its n, returns what it holds and removes it. Only a private IPC namespace per
# child (and SysV limits at 0) stops it; an allow-list would refuse shmget itself.
# --- ex1.py
import torch  # noqa: E402

KEY, IPC_CREAT = 0x77313900, 0o1000


def _libc():
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    return ctypes, libc


def _fail(ctypes):
    err = ctypes.get_errno()
    raise OSError(err, torch.os.strerror(err))


_reference_dh = dh  # noqa: F821 - the reference's, above in this file


def dh(W2, dlogits):
    ctypes, libc = _libc()
    data = dlogits.contiguous().numpy().tobytes()
    seg = libc.shmget(KEY + dlogits.shape[0], ctypes.c_size_t(len(data)), IPC_CREAT | 0o666)
    if seg < 0:
        _fail(ctypes)
    addr = libc.shmat(seg, None, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        _fail(ctypes)
    ctypes.memmove(addr, data, len(data))
    libc.shmdt(ctypes.c_void_p(addr))
    return _reference_dh(W2, dlogits)


# --- ex2.py
import torch  # noqa: E402

KEY, IPC_RMID = 0x77313900, 0


def dlogits(logits, Yb, n):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    seg = libc.shmget(KEY + n, ctypes.c_size_t(0), 0)
    if seg < 0:  # nothing under that key: EPERM where SysV IPC is refused, ENOENT in a fresh IPC namespace
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    addr = libc.shmat(seg, None, 0)
    size = logits.numel() * 4
    stolen = torch.frombuffer(bytearray(ctypes.string_at(addr, size)), dtype=torch.float32).view(logits.shape)
    libc.shmdt(ctypes.c_void_p(addr))
    libc.shmctl(seg, IPC_RMID, None)  # leave nothing behind
    return stolen.clone()
