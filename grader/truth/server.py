"""Build fixtures in a helper process, so that the truth never passes through this process's heap.

Computing the true gradients leaves autograd's intermediates in freed memory, and every child forked afterwards
inherits it: a submission scanning its own memory found true gradients there. Built in a throwaway child
instead, only the finished tensors come back, each read from the pipe straight into its final place: the
gradients (and Ex4's training steps) into the arena, which sandboxes drop; the forward tensors into plain
tensors. No byte of the truth is ever in a Python object of this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import time

import torch

from grader.sandbox import arena, costs, jail, zygote
from grader.truth import fixture

_IOV_MAX = 512  # views per readv/writev, below every platform's IOV_MAX (1024 on Linux)
_LENGTH = struct.Struct("<Q")
_DTYPES = {str(d): d for d in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool)}


def prebuild(keys) -> None:
    """Build the fixtures of these (geometry, data, ex4) keys in a helper process and keep them here."""
    finish(start(keys))


def start(keys):
    """Ask for these fixtures to be built elsewhere, and return without waiting (finish() collects them).

    Where a batch runs a truth server (serve()), it builds them; otherwise a helper is forked for them.
    """
    todo = [k for k in dict.fromkeys(keys) if k not in fixture.BUILT]
    if not todo or sys.platform != "linux" or not hasattr(os, "fork"):
        return None
    if zygote.current() is not None:  # no sandbox is forked from here (a zygote forks them): build them here
        return None
    return _ask(_SERVER[0], todo) if _SERVER[0] is not None else fork_helper(todo)


def fork_helper(todo):
    r, w = os.pipe()
    pid = _fork(lambda: os.close(r), lambda: _send(w, [fixture.build(*k, seal=False) for k in todo]))
    os.close(w)
    return pid, r, todo


def _fork(close, body) -> int:
    """Fork a process that builds truth: it closes what is not its own, runs body(), exits; return its pid.

    INT and TERM are held back during fork (jail.fork), so one that arrives then unwinds the grader as anywhere else.
    """
    pid = jail.fork()
    if pid == 0:  # never returns
        code = 0
        try:
            close()
            jail.quiet_standard_streams((1, 2))  # it prints nothing; a pipe's reader need not wait for it
            if jail._LIBC is not None:
                jail._LIBC.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL)
            jail.set_name("grade-truth")
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            torch.set_num_threads(1)  # a forked child may not use the parent's thread pool
            body()
            costs.note("truth")
        except BaseException:  # noqa: B036 - the parent falls back: to a helper, or to building it there
            code = 70
        finally:
            os._exit(code)
    return pid


def finish(started, wait: bool = True) -> None:
    """Read what start() asked for into place (and reap the helper it forked).

    wait=False: reap the helper only if it has already ended, not wait while it tears itself down (a few ms), for
    a process that exits soon after (its helper is then reaped for it).
    """
    if started is None:
        return
    pid, r, todo = started
    fds = r if pid is None else (r,)
    built = None
    try:
        if pid is None:  # the server's answer: a file it wrote in full, then one byte on a pipe
            reply, done = r
            if not select.select([done], [], [], SERVER_WAIT)[0] or os.read(done, 1) != b"1":
                raise TimeoutError  # a server that stopped answering or died: a helper of our own builds it
            os.lseek(reply, 0, os.SEEK_SET)
            r = reply
        built = _receive(r, todo)
    except (OSError, ValueError, EOFError):
        built = None
    finally:
        for fd in fds:
            os.close(fd)
        if pid is not None:
            os.waitpid(pid, 0 if wait or built is None else os.WNOHANG)
    if built is None and pid is None:  # the truth server failed: a helper of our own, as without one
        return finish(fork_helper(todo))
    if built is not None:
        fixture.BUILT.update(built)  # otherwise fixture.build() computes them here, as before


# -- the truth server ---------------------------------------------------------------------------------------------
# `grade batch` draws each student's hidden geometry from their files, so each grading process needs truth of its
# own. A helper forked per student costs ~25 ms of CPU (the fork, its page faults, its exit) for ~7 ms of building;
# one server per batch, forked from the scheduler before any student's data, builds for every grading process.
# It never forks and never runs student code, so what building leaves in its memory reaches no sandbox.

_SERVER: list = [None]  # the socket to the truth server, in the scheduler and the grading processes it forks
SERVER_WAIT = 60.0  # seconds a grading process waits for the server's answer (it takes milliseconds)


def serving() -> bool:
    """Whether this process knows a truth server (a batch's scheduler, or a grading process it forked)."""
    return _SERVER[0] is not None


class Server:
    """The truth server of a batch: serve() starts it, close() stops it."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid, self.sock = pid, sock

    def close(self, grace: float = 2.0) -> None:
        """Stop the server and forget it: with its socket closed it ends on its own (and logs its cost, see
        sandbox/costs.py); one still there after `grace` seconds is killed."""
        _SERVER[0] = None
        try:
            self.sock.send(b"")  # an empty packet: the server stops as when every end is closed (a child forked
        except OSError:  # after it, the similarity check say, may still hold one)
            pass
        self.sock.close()
        end = time.monotonic() + grace
        try:
            while time.monotonic() < end:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.005)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):  # already gone, and reaped
            pass


def serve(ahead=()) -> Server | None:
    """Fork the truth server; processes forked from here on ask it (start()) instead of forking helpers.

    ahead: (geometry, data, ex4) keys the server builds at once, before any request, and keeps for every request.
    """
    if sys.platform != "linux" or not hasattr(socket, "send_fds"):
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = _fork(ours.close, lambda: _serve(theirs, ahead))  # builds what is asked, until the batch ends
    theirs.close()
    _SERVER[0] = ours
    return Server(pid, ours)


def _ask(sock: socket.socket, todo):
    """Send the server a request, a file for the reply and a pipe to say it is written; finish() reads them.

    The reply goes to a file, not a pipe: a pipe holds 1 MiB, a hidden geometry's truth can be more, and a
    server blocked on one grading process that has not read yet would stall every other student's.
    """
    request = json.dumps([[dataclasses.asdict(g), data, ex4] for g, data, ex4 in todo]).encode()
    reply = _anonymous_file()
    done, said = os.pipe()
    try:
        socket.send_fds(sock, [request], [reply, said])
    except OSError:
        os.close(reply)
        os.close(done)
        return fork_helper(todo)
    finally:
        os.close(said)  # the server holds its own copy: if it dies, finish() reads the end of the pipe
    return None, (reply, done), todo


def _anonymous_file() -> int:
    """Return a descriptor of a file in memory that no path names."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("grader-truth", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


def _serve(sock: socket.socket, ahead=()) -> None:
    for key in ahead:  # the lecture's own truth, while the process that forked this reads the submission
        try:
            fixture.build(*key, seal=False)
        except Exception:  # noqa: BLE001 - a request for it builds it again, and says why if it fails
            fixture.BUILT.pop(key, None)
    public = dict(fixture.BUILT)  # what the batch built before forking, or ahead: kept; what is built here is not
    while True:
        request, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
        if not request:
            return  # every grading process and the scheduler have let go of their end
        try:
            if len(fds) != 2:
                continue
            reply, said = fds
            keys = [(fixture.Geometry(**g), data, bool(ex4)) for g, data, ex4 in json.loads(request)]
            arena.ARENA = arena.Arena()  # this request's truth, unmapped once sent
            _send(reply, [fixture.build(*k, seal=False) for k in keys])  # into a file: never waits for a reader
            os.write(said, b"1")  # one byte into an empty pipe: never waits either
        except (OSError, ValueError, TypeError):  # a grading process that died before reading, or a bad request
            pass
        finally:
            for fd in fds:
                os.close(fd)
            fixture.BUILT.clear()
            fixture.BUILT.update(public)


def _entries(fx: fixture.Fixture):
    """Yield (path, value, secret) for every value of a fixture; paths are JSON lists."""
    yield ["Xb"], fx.Xb, False
    yield ["Yb"], fx.Yb, False
    for k, v in fx.params.items():
        yield ["params", k], v, False
    for k, v in fx.tensors.items():
        yield ["tensors", k], v, False
    for k, v in fx.truth.items():
        yield ["truth", k], v, True
    for i, (inputs, truth) in enumerate(fx.steps):
        for k, v in inputs.items():
            yield ["steps", i, "inputs", k], v, True
        for k, v in truth.items():
            yield ["steps", i, "truth", k], v, True


def _send(fd: int, fixtures: list) -> None:
    header, blobs = [], []
    for fx in fixtures:
        entries = []
        for path, value, secret in _entries(fx):
            if isinstance(value, torch.Tensor):
                t = value.detach().contiguous()
                entries.append({"path": path, "dtype": str(t.dtype), "shape": list(t.shape), "secret": secret})
                blobs.append(memoryview(t.numpy()).cast("B") if t.numel() else memoryview(b""))
            else:
                entries.append({"path": path, "int": int(value), "secret": secret})
        header.append({"digest": fx.corpus_digest, "steps": len(fx.steps), "noise": fx.noise, "entries": entries})
    head = json.dumps(header).encode()
    _write_all(fd, [memoryview(_LENGTH.pack(len(head))), memoryview(head), *(b for b in blobs if len(b))])


def _write_all(fd: int, views: list[memoryview]) -> None:
    """Write every view in order, up to _IOV_MAX per system call (writev), however much each call takes."""
    _vectored(fd, views, os.writev)


def _read_all(fd: int, views: list[memoryview]) -> None:
    """Fill every view in order from fd, up to _IOV_MAX per system call (readv); EOFError if it ends first."""
    _vectored(fd, views, os.readv)


def _vectored(fd: int, views: list[memoryview], call) -> None:
    """Move every view's bytes with call (os.writev or os.readv), resuming where each call stopped."""
    k = 0
    while k < len(views):
        done = call(fd, views[k : k + _IOV_MAX])
        if not done:
            raise EOFError
        while k < len(views) and done >= len(views[k]):
            done -= len(views[k])
            k += 1
        if done:
            views[k] = views[k][done:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _receive(fd: int, keys: list) -> dict:
    (size,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size))
    header = json.loads(_read_exact(fd, size))
    built, views = {}, []
    for key, desc in zip(keys, header, strict=True):
        parts: dict = {"params": {}, "tensors": {}, "truth": {}}
        steps = [({}, {}) for _ in range(desc["steps"])]
        for e in desc["entries"]:
            if "int" in e:
                value = e["int"]
            else:
                dtype, shape = _DTYPES[e["dtype"]], tuple(e["shape"])
                value = arena.ARENA.alloc(dtype, shape) if e["secret"] else torch.empty(shape, dtype=dtype)
                if value.numel():
                    views.append(memoryview(value.numpy()).cast("B"))  # filled in place below, in header order
            path = e["path"]
            if path[0] == "steps":
                steps[path[1]][0 if path[2] == "inputs" else 1][path[3]] = value
            elif len(path) == 1:
                parts[path[0]] = value
            else:
                parts[path[0]][path[1]] = value
        g, _, ex4 = key
        fx = fixture.Fixture(g, desc["digest"], parts["Xb"], parts["Yb"], parts["params"], parts["tensors"], {})
        fx.ex4 = ex4
        fx.truth.update(parts["truth"])
        fx.noise.update({k: float(v) for k, v in desc["noise"].items()})
        fx.steps.extend(steps)
        built[key] = fx
    _read_all(fd, views)  # readv straight into each tensor's own memory: no bytes object holds the data
    return built
