# expect: exercise=ex1 item=ex1.dprobs status=error message=malformed reply
import torch


def dprobs(dlogprobs, probs):
    header = b'{"ok": true, "value": [1, 2], "after": 5, "autograd": {"x": 1}, "error": "boom"}'
    frame = len(header).to_bytes(4, "little") + (0).to_bytes(4, "little") + header
    for fd in range(3, 64):
        try:
            torch.os.write(fd, frame)
        except Exception:
            pass
    return dlogprobs / probs
