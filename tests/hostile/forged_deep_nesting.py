# expect: exercise=ex1 item=ex1.dprobs status=error message=malformed reply
import torch


def _forge(header: bytes, blob: bytes = b""):
    frame = len(header).to_bytes(4, "little") + len(blob).to_bytes(4, "little") + header + blob
    for fd in range(3, 64):
        try:
            torch.os.write(fd, frame)
        except Exception:
            pass


def dprobs(dlogprobs, probs):
    _forge(b"[" * 300000 + b"]" * 300000)
    return dlogprobs / probs
