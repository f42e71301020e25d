"""A zygote: a clean process that forks sandbox children for a long-lived parent that must not be forked.

A process that grades one student after another holds every earlier student's code and replies in its memory,
so a sandbox must never be its fork. It asks a zygote instead: a process forked before any student's data was
read, which never reads any and runs no student code, and forks each sandbox child from that clean memory.

The parent sends the child's ends (request and reply pipes, output file, shared memory) over a socket; the
zygote forks the child behind the walls (child.child_main) and answers with its pid and a pidfd, through which
the parent signals it (pidfd_send_signal: never another process that took a reused pid). The zygote reaps its
children and tells the parent how each ended. It stops, taking its children along, when the parent's end of the
socket closes.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import select
import signal
import socket
import sys

from grader.sandbox import costs, jail

_MESSAGE = 1 << 16
_CURRENT: list = [None]  # the zygote this process's sandboxes come from (None: fork them here)


def supported() -> bool:
    """Whether this platform has what a zygote needs: fork, passing descriptors, pidfds."""
    return (
        sys.platform == "linux"
        and hasattr(socket, "send_fds")
        and hasattr(os, "pidfd_open")
        and hasattr(signal, "pidfd_send_signal")
    )


def current() -> Client | None:
    """Return the zygote this process asks for sandboxes, or None."""
    return _CURRENT[0]


def use(client: Client | None) -> None:
    """Ask this zygote for every sandbox from now on (None: fork them in this process again)."""
    _CURRENT[0] = client


def start(close_in_zygote=()) -> tuple[int, socket.socket]:
    """Fork a zygote now; return its pid and this side's socket (hand it to Client in the process that asks).

    close_in_zygote: descriptors of this process that the zygote must not hold (other processes' pipes).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = jail.fork()
    if pid == 0:  # the zygote: never returns
        code = 0
        try:
            ours.close()
            for fd in close_in_zygote:
                _close(fd)
            _serve(theirs)
        except BaseException:  # noqa: B036 - a zygote that fails stops; its parent's sandboxes then fail to start
            code = 70
        finally:
            os._exit(code)
    theirs.close()
    return pid, ours


@contextlib.contextmanager
def serving():
    """Fork a zygote now and ask it for every sandbox until the block ends (nothing, where none can be used).

    For a process that grades one student and judges as it goes (Gradescope, PrairieLearn): a child restarted
    after a crash is then forked from clean memory too, not from this process and what judging left in it.
    """
    from grader.sandbox.worker import backend

    if not supported() or current() is not None or backend() != "fork":
        yield
        return
    pid, sock = start()
    try:
        use(Client(sock, pid))
        yield
    finally:
        use(None)
        sock.close()  # the zygote kills the children it still has, reaps them and ends
        os.waitpid(pid, 0)


class Client:
    """The parent's side of a zygote: fork a sandbox child there, signal it, learn how it ended."""

    def __init__(self, sock: socket.socket, pid: int | None = None):
        self.sock, self.pid = sock, pid
        self.exits: dict[int, int] = {}  # pid: wait status, for children that ended and were not yet asked about
        self.next_id = 0

    def fork(self, req_r: int, rep_w: int, out_fd: int, shared_fd: int, limits, uid: int, room: str) -> tuple:
        """Fork a sandbox child holding these descriptors; return (pid, pidfd, pid_ns). Raise OSError if none."""
        self.next_id += 1
        request = {"op": "fork", "id": self.next_id, "limits": _limits_dict(limits), "uid": uid, "room": room}
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [req_r, rep_w, out_fd, shared_fd])
            while True:
                message, fds = self._next(None)
                if message.get("op") in ("forked", "failed") and message.get("id") == self.next_id:
                    break
                for fd in fds:
                    os.close(fd)
        except (EOFError, ValueError) as exc:
            raise OSError(f"the zygote could not fork a sandbox: {exc}") from None
        if message["op"] != "forked" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise OSError(f"the zygote could not fork a sandbox: {message.get('why', 'no reason given')}")
        return message["pid"], fds[0], bool(message["pid_ns"])

    def kill(self, pid: int, pidfd: int) -> None:
        """Kill a child now (through its pidfd) and ask the zygote to kill its process group too."""
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.sock.send(json.dumps({"op": "kill", "pid": pid}).encode())
        except OSError:
            pass

    def status(self, pid: int, wait: bool) -> int | None:
        """Return how a child ended (a wait status), or None if it has not yet (or, wait=True: block until it has)."""
        while pid not in self.exits:
            try:
                got = self._next(None if wait else 0.0)
            except (EOFError, ValueError):
                return -1  # the zygote is gone, and its children with it
            if got is None:
                return None
            for fd in got[1]:
                os.close(fd)
        return self.exits.pop(pid)

    def _next(self, timeout: float | None) -> tuple[dict, list] | None:
        """Read the zygote's next message (None if none came within timeout); note it if it tells of an exit."""
        if timeout is not None and not select.select([self.sock], [], [], timeout)[0]:
            return None
        data, fds, _, _ = socket.recv_fds(self.sock, _MESSAGE, 2)
        if not data:
            raise EOFError("the zygote stopped")
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("the zygote sent an unreadable message")
        if message.get("op") == "exit":
            self.exits[message["pid"]] = message["status"]
        return message, fds

    def alive(self) -> bool:
        """Whether the zygote still answers (its end of the socket is open); exits it told of are noted."""
        try:
            while select.select([self.sock], [], [], 0)[0]:
                got = self._next(0)
                if got is None:
                    break
                for fd in got[1]:
                    os.close(fd)
        except (EOFError, ValueError, OSError):
            return False
        return True

    def close(self) -> None:
        """Let the zygote go: it kills what children it still has, reaps them and ends."""
        self.sock.close()


def _limits_dict(limits) -> dict:
    return {k: getattr(limits, k) for k in ("timeout", "memory_mb", "output_bytes", "cpu_seconds")}


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# -- the zygote itself ----------------------------------------------------------------------------------------------


def _serve(sock: socket.socket) -> None:
    """Fork a child per request until the parent lets go; tell it how each child ended; then stop them all."""
    from grader.sandbox import child

    jail.set_name("grade-zygote")
    if jail._LIBC is not None:
        jail._LIBC.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    child.prepare_forks()  # holds no secret from here on, and every child starts armed
    children: dict[int, int] = {}  # pidfd: pid
    try:
        while True:
            ready, _, _ = select.select([sock, *children], [], [])
            for fd in ready:
                if fd in children:
                    _reaped(sock, children.pop(fd), fd)
            if sock not in ready:
                continue
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 4)
            if not data:
                return
            message = {}
            try:
                message = json.loads(data)
                if message.get("op") == "kill" and message.get("pid") in children.values():
                    _kill_group(message["pid"])
                elif message.get("op") == "fork" and len(fds) == 4:
                    pid, pidfd, pid_ns = _fork(message, fds)
                    children[pidfd] = pid
                    socket.send_fds(
                        sock,
                        [json.dumps({"op": "forked", "id": message["id"], "pid": pid, "pid_ns": pid_ns}).encode()],
                        [pidfd],
                    )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                sock.send(json.dumps({"op": "failed", "id": message.get("id"), "why": str(exc)[:200]}).encode())
            finally:
                for fd in fds:
                    _close(fd)
    finally:
        for pidfd, pid in children.items():
            _kill_group(pid)
            _, _, usage = os.wait4(pid, 0)
            costs.reaped(usage)
            _close(pidfd)
        costs.note("zygote")


def _fork(message: dict, fds: list) -> tuple[int, int, bool]:
    """Fork one sandbox child from this clean process; return (pid, pidfd, pid_ns)."""
    from grader.sandbox import child
    from grader.sandbox.worker import SHARED_BYTES, Limits

    req_r, rep_w, out_fd, shared_fd = fds
    limits = Limits(**message["limits"])
    uid, room = int(message["uid"]), str(message["room"])
    pid, pid_ns = jail.fork_child()
    if pid == 0:  # the sandbox child: never returns
        try:
            shared = mmap.mmap(shared_fd, SHARED_BYTES)
            child.child_main(req_r, rep_w, out_fd, limits, uid, pid_ns, room, shared)
        except BaseException:  # noqa: B036 - report, never fall back into the zygote's loop
            import traceback

            traceback.print_exc()
        finally:
            os._exit(70)
    return pid, os.pidfd_open(pid), pid_ns


def _reaped(sock: socket.socket, pid: int, pidfd: int) -> None:
    """Reap a child that ended and tell the parent how."""
    _, status, usage = os.wait4(pid, 0)
    costs.reaped(usage)
    _close(pidfd)
    try:
        sock.send(json.dumps({"op": "exit", "pid": pid, "status": status}).encode())
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    """Kill a child that is not yet reaped (so its pid is still its own), and its process group."""
    for target in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.killpg(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
