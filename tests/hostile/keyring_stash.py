# expect: exercise=ex2 item=ex2.dlogits status=error message=keyring
# scan: evaded
# Kernel keyrings belong to a uid, not to a namespace: stash Ex1's input dlogits (Ex2's answer) there.
# --- ex1.py
import torch

SYS_ADD_KEY, SYS_KEYCTL, KEYCTL_SEARCH, KEYCTL_READ, USER_KEYRING = 248, 250, 10, 11, -4


def _libc():
    ctypes = torch.sys.modules["ctypes"]
    return ctypes, ctypes.CDLL(None, use_errno=True)


def dh(dlogits, W2):
    ctypes, libc = _libc()
    data = dlogits.contiguous().numpy().tobytes()
    libc.syscall(SYS_ADD_KEY, b"user", b"ninja-dlogits-%d" % dlogits.shape[0], data, len(data), USER_KEYRING)
    return dlogits @ W2.T


# --- ex2.py
import torch  # noqa: E402


def dlogits(logits):
    ctypes = torch.sys.modules["ctypes"]
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(250, 10, -4, b"user", b"ninja-dlogits-%d" % logits.shape[0], 0)
    if key < 0:
        raise RuntimeError(f"keyring: nothing stashed (errno {ctypes.get_errno()})")
    buf = ctypes.create_string_buffer(1 << 16)
    got = libc.syscall(250, 11, key, buf, 1 << 16)
    return torch.frombuffer(bytearray(buf.raw[:got]), dtype=torch.float32).view(logits.shape).clone()
