# expect: exercise=ex1 item=ex1.dprobs status=error message=malformed reply
import torch


def dprobs(dlogprobs, probs):
    nbytes = 48 << 20  # one 48 MiB block, described 200 times: 9.6 GB if the parent copied each
    desc = (
        '{"kind": "tensor", "dtype": "float32", "shape": [%d], "offset": 0, "nbytes": %d, '
        '"requires_grad": false, "grad_fn": false}' % (nbytes // 4, nbytes)
    )
    items = ", ".join('"k%d": %s' % (i, desc) for i in range(200))
    header = ('{"ok": true, "value": {"kind": "dict", "items": {%s}}, "after": {}, "autograd": []}' % items).encode()
    frame = len(header).to_bytes(4, "little") + nbytes.to_bytes(4, "little") + header
    for fd in range(3, 64):
        try:
            torch.os.write(fd, frame)
            torch.os.write(fd, bytes(nbytes))
        except Exception:
            pass
    return dlogprobs / probs
