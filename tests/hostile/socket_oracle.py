# expect: exercise=ex2 item=ex2.dlogits status=error message=Operation not permitted
# Ask an oracle for the answer: another student's sandbox graded at the same time (or any process on the
# machine) listening on an abstract unix socket or on loopback TCP receives this call's logits and Yb and
# sends back dlogits, worked out on these very inputs (the hidden geometry too). Nothing of the solution is in
# this file, so no similarity check sees it. Where the sandbox shares the host's network namespace (root
# without CAP_SYS_ADMIN, as in a default Docker container) the oracle is reachable; an allow-list refuses
# socket() itself.
import torch  # noqa: E402


def _ask(sock, logits, Yb, n):
    payload = logits.contiguous().numpy().tobytes() + Yb.to(torch.int32).numpy().tobytes()
    sock.sendall(torch.tensor([n, logits.shape[1]], dtype=torch.int32).numpy().tobytes() + payload)
    want, got = logits.numel() * 4, b""
    while len(got) < want:
        chunk = sock.recv(want - len(got))
        if not chunk:
            raise ConnectionError("the oracle hung up")
        got += chunk
    return torch.frombuffer(bytearray(got), dtype=torch.float32).view(logits.shape).clone()


def dlogits(logits, Yb, n):
    socket = torch.sys.modules["socket"]
    errors = []
    for family, address in ((socket.AF_UNIX, "\0w19-backprop-oracle"), (socket.AF_INET, ("127.0.0.1", 47019))):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                sock.connect(address)
                return _ask(sock, logits, Yb, n)
        except OSError as exc:
            errors.append(exc)
    first = errors[0]
    raise OSError(first.errno, f"{first.strerror}; {'; '.join(map(str, errors[1:]))}")
