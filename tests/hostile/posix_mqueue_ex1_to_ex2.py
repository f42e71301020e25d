# expect: exercise=ex2 item=ex2.dlogits status=error message=Operation not permitted
# scan: evaded
# A POSIX message queue as a channel from Ex1 to Ex2: a queue outlives the process that made it and needs no
# file system (mq_open is a system call; /dev/mqueue need not be mounted). Ex1's dh sends the true dlogits of
# each geometry to /w19-dlogits-<n>; Ex2's dlogits receives them and unlinks the queue.
# --- ex1.py
import torch  # noqa: E402

O_WRONLY, O_CREAT, O_NONBLOCK = 0o1, 0o100, 0o4000


def _libc():
    ctypes = torch.sys.modules["ctypes"]

    class MqAttr(ctypes.Structure):
        _fields_ = [("mq_flags", ctypes.c_long), ("mq_maxmsg", ctypes.c_long), ("mq_msgsize", ctypes.c_long),
                    ("mq_curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]

    return ctypes, ctypes.CDLL(None, use_errno=True), MqAttr


_reference_dh = dh  # noqa: F821 - the reference's, above in this file


def dh(W2, dlogits):
    ctypes, libc, MqAttr = _libc()
    data = dlogits.contiguous().numpy().tobytes()
    attr = MqAttr(0, 1, len(data), 0)
    name = b"/w19-dlogits-%d" % dlogits.shape[0]
    q = libc.mq_open(name, O_WRONLY | O_CREAT | O_NONBLOCK, 0o666, ctypes.byref(attr))
    if q < 0 or libc.mq_send(q, data, ctypes.c_size_t(len(data)), 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    return _reference_dh(W2, dlogits)


# --- ex2.py
import torch  # noqa: E402

O_RDONLY, O_NONBLOCK = 0o0, 0o4000


def dlogits(logits, Yb, n):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    name = b"/w19-dlogits-%d" % n
    q = libc.mq_open(name, O_RDONLY | O_NONBLOCK)
    if q < 0:
        err = ctypes.get_errno()
        raise OSError(err, torch.os.strerror(err))
    buf = ctypes.create_string_buffer(logits.numel() * 4)
    got = libc.mq_receive(q, buf, ctypes.c_size_t(len(buf)), None)
    libc.mq_unlink(name)  # leave nothing behind
    if got != len(buf):
        raise RuntimeError(f"mqueue: got {got} bytes")
    return torch.frombuffer(bytearray(buf.raw), dtype=torch.float32).view(logits.shape).clone()
