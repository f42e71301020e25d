"""The parent's side of a sandbox: start a child, send it one request at a time, read back a checked reply.

Two backends start the child. `fork` (Linux): a fork of this warm process (torch imported), put behind every
wall in jail.py. `spawn` (any platform, or GRADER_SANDBOX=spawn): a fresh interpreter with a deadline, rlimits
where the platform has them, and no answers in its memory at all. Either way the parent waits with a deadline,
reads a bounded frame, and kills the child when it hangs, floods or breaks the protocol.
"""

from __future__ import annotations

import mmap
import os
import queue
import select
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from grader.sandbox import costs, forget, jail, prespawn, wire, zygote


@dataclass(frozen=True)
class Limits:
    """Per-child resource limits."""

    timeout: float = 10.0  # wall seconds per request
    memory_mb: int = prespawn.MEMORY_MB  # address space a child may add on top of the warm parent
    output_bytes: int = 4 << 20  # stdout + stderr a child may write
    cpu_seconds: int = prespawn.CPU_SECONDS  # CPU seconds over the child's whole life


@dataclass
class Reply:
    """What came back for one request: a decoded header, or why nothing did."""

    header: dict = field(default_factory=dict)
    blob: bytes = b""
    failure: str | None = None  # "timeout" | "crash" | "protocol"
    reason: str = ""
    output: str = ""  # what the child printed while handling this request
    changed: frozenset | None = None  # inputs the call changed in place, read from shared memory (None: not known)

    @property
    def ok(self) -> bool:
        return self.failure is None


MALFORMED = "the submission wrote a malformed reply"
SHARED_BYTES = 64 << 20  # a request's inputs, at most (Ex4's hidden geometry needs a few MB); larger go in the frame
_SLOT = [None]  # the concurrent slot of this grading process (batch); None: derive one from the pid


def set_slot(slot: int | None):
    """Say which concurrent grading slot this process is, so its sandboxes get that slot's uid."""
    _SLOT[0] = slot


def current_uid() -> int:
    """Return the uid this process's sandboxes run as (when it may switch uid at all)."""
    slot = _SLOT[0] if _SLOT[0] is not None else 1000 + os.getpid() % 1_000_000
    return jail.sandbox_uid(slot)


def backend() -> str:
    """Return the sandbox backend: fork on Linux, spawn elsewhere or when GRADER_SANDBOX=spawn."""
    return prespawn.backend()


_PROBED: dict[str, jail.Protections] = {}
_FIELDS = ("pid_ns", "ipc_ns", "ipc_limits", "net_ns", "chroot", "own_uid", "rlimits", "seccomp", "caps")


def saw_walls(walls: dict | None):
    """Remember the walls a real child of this process reported, so that protections() needs no probe.

    A child could lie here, but only about its own walls, and only in a line it prints for its own student.
    """
    kind = backend()
    if walls and kind not in _PROBED and kind == "fork":
        _PROBED[kind] = jail.Protections(**{k: bool(walls.get(k)) for k in (*_FIELDS, "user_ns")}, backend="fork")


def protections() -> jail.Protections:
    """Return which walls this machine gives a sandbox, found once per process by a throwaway child."""
    kind = backend()
    if kind not in _PROBED:
        if kind == "spawn":
            _PROBED[kind] = jail.Protections(rlimits=os.name == "posix", backend="spawn")
        else:
            _PROBED[kind] = _probe()
    return _PROBED[kind]


def _probe() -> jail.Protections:
    """Fork a throwaway child behind every wall and read back, one byte per wall, which it got."""
    r, w = os.pipe()
    with jail.held() as where:
        uid = current_uid()
        room = where.room(uid)
        pid, pid_ns = jail.fork_child()
        if pid == 0:
            try:
                os.dup2(w, 3)  # a descriptor the allow-list lets it write to
                got = jail.enter(room, uid, Limits(), pid_ns)
                os.write(3, bytes(int(bool(getattr(got, name))) for name in _FIELDS))
            finally:
                os._exit(0)
        os.close(w)
        bits = b""
        while len(bits) < len(_FIELDS):
            chunk = os.read(r, len(_FIELDS))
            if not chunk:
                break
            bits += chunk
        os.close(r)
        os.waitpid(pid, 0)
        where.release_room(room)
    walls = {name: k < len(bits) and bits[k] == 1 for k, name in enumerate(_FIELDS)}
    return jail.Protections(**walls, user_ns=walls["pid_ns"] and not jail.is_root(), backend="fork")


class Worker:
    """A sandboxed child holding one exercise file; ask it one request at a time."""

    def __init__(self, limits: Limits, warm_here: bool = True):
        self.limits = limits
        self.warm_here = warm_here
        self.out = tempfile.TemporaryFile()
        self.out_pos = 0
        self.alive = True
        self._pending = bytearray()  # what was read from the reply pipe past the frame being read (fork backend)
        self.backend = backend()
        if self.backend == "fork":
            self.start_fork()
        else:
            self.start_spawn()

    # -- starting ------------------------------------------------------------------------------------------------

    def start_fork(self):
        from grader.sandbox import child

        self.pidfd = None
        if zygote.current() is not None:
            return self.start_from_zygote(zygote.current())
        self.shared = mmap.mmap(-1, SHARED_BYTES)  # MAP_SHARED|MAP_ANONYMOUS: pages exist once written

        if self.warm_here:  # here, once: every child forked afterwards inherits it
            child.warm_up()  # (a lone child warms itself, before its jail, while this process works on)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        uid = current_uid()
        self.jail = jail.jail()
        self.room = jail_path = self.jail.room(uid)  # its own empty root: no inode shared with any other child
        jail.flush_standard_streams()  # or the child would copy what is pending into its output
        pid, pid_ns = jail.fork_child()
        if pid == 0:  # child: never returns
            try:
                os.close(req_w)
                os.close(rep_r)
                child.child_main(req_r, rep_w, self.out.fileno(), self.limits, uid, pid_ns, jail_path, self.shared)
            except BaseException:  # noqa: B036 - report, never fall back into the parent's code
                import traceback

                traceback.print_exc()
            finally:
                os._exit(70)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.proc = pid, None
        self.req_w, self.rep_r = req_w, rep_r
        os.set_blocking(req_w, False)

    def start_from_zygote(self, forker: zygote.Client):
        """Have the zygote fork the child (this process holds other students' data: it is never forked)."""
        shared_fd = os.memfd_create("grader-shared", os.MFD_CLOEXEC)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.zygote = forker
        self.jail = jail.jail()
        uid = current_uid()
        self.room = self.jail.room(uid)
        try:
            os.ftruncate(shared_fd, SHARED_BYTES)  # pages exist once written, as with MAP_ANONYMOUS
            self.shared = mmap.mmap(shared_fd, SHARED_BYTES)
            self.pid, self.pidfd, _ = forker.fork(
                req_r, rep_w, self.out.fileno(), shared_fd, self.limits, uid, self.room
            )
        except OSError:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            for fd in (shared_fd, req_r, rep_w):
                os.close(fd)
        self.proc = None
        self.req_w, self.rep_r = req_w, rep_r
        os.set_blocking(req_w, False)

    def start_spawn(self):
        modules = forget.handler_modules()
        ahead = prespawn.take(self.limits.memory_mb, self.limits.cpu_seconds, modules)
        if ahead is not None:  # started before this process imported torch (grade exN on a laptop)
            self.out.close()
            self.proc, self.out = ahead
        else:
            self.proc = prespawn.popen(self.limits.memory_mb, self.limits.cpu_seconds, modules, self.out)
        self.pid = self.proc.pid
        self._frames: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream):
        """Read raw bytes from a spawned child into a queue (select does not work on Windows pipes)."""
        while True:
            try:
                chunk = stream.read1(1 << 20)
            except (OSError, ValueError):
                chunk = b""
            self._frames.put(chunk)
            if not chunk:
                return

    # -- asking --------------------------------------------------------------------------------------------------

    def ask(self, request: dict, parts: list = (), timeout: float | None = None, on_progress=None) -> Reply:
        """Send a request and wait for its reply, killing the child if it takes longer than the timeout.

        Frames whose header has a "progress" key come before the reply; each goes to on_progress(header).
        """
        return self.ask_many(request, parts, 1, timeout, on_progress)[0]

    def ask_many(self, request: dict, parts, replies: int, timeout=None, on_progress=None) -> list[Reply]:
        """Send one request and read `replies` replies, each within the timeout; stop at the first failure."""
        failed = self.send(request, parts, timeout)
        return [failed] if failed is not None else self.receive(replies, timeout, on_progress)

    def send(self, request: dict, parts=(), timeout=None, watch=None) -> Reply | None:
        """Send one request without waiting for its reply; return why that failed, or None.

        watch: per reply to come, {input name: (offset, nbytes)} of the tensors in parts. With the fork backend
        those inputs go into memory the child maps in place, and each reply says which of them the call changed,
        read here from that memory: the child cannot forge it.
        """
        if not self.alive:
            return Reply(failure="crash", reason="the sandbox process had already stopped")
        timeout = self.limits.timeout if timeout is None else timeout
        self._buffer = getattr(self, "_buffer", b"")
        parts = [parts] if isinstance(parts, (bytes, bytearray, memoryview)) else list(parts)
        self._watch = None
        shared = getattr(self, "shared", None)
        if watch is not None and shared is not None and sum(len(p) for p in parts) <= SHARED_BYTES:
            self._watch, originals, at = list(watch), {}, 0
            with memoryview(shared) as region:
                for part in parts:
                    size = len(part)
                    region[at : at + size] = memoryview(part).cast("B")
                    originals[at] = bytes(part)  # a copy: what the parent sent, whatever happens to the region
                    at += size
            self._originals = originals
            request, parts = {**request, "shared": True}, []
        try:
            for data in wire.pack_parts(request, parts):
                self._write(data, time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            return Reply(failure="timeout", reason=f"no answer within {timeout:g} s", output=self._output())
        except EOFError:
            return Reply(failure="crash", reason=self._death(), output=self._output())
        self._sent_at = time.monotonic()
        return None

    def receive(self, replies: int = 1, timeout=None, on_progress=None) -> list[Reply]:
        """Read the replies to the request sent last, each within the timeout; stop at the first failure.

        The first reply's time counts from the sending (the child works while this process does something else),
        each later one's from the reply before it.
        """
        timeout = self.limits.timeout if timeout is None else timeout
        got, start = [], getattr(self, "_sent_at", None) or time.monotonic()
        for _ in range(replies):
            got.append(self._reply(timeout, on_progress, start))
            if not got[-1].ok:
                break
            start = time.monotonic()
        return got

    _watch: list | None = None

    def _reply(self, timeout: float, on_progress, start: float) -> Reply:
        """Read one reply within the timeout, counted from start."""
        deadline = start + timeout
        try:
            while True:
                nhead, nblob = wire.read_lengths(self._read(wire.PREFIX_SIZE, deadline))
                header = wire.decode_header(self._read(nhead, deadline))
                body = self._read(nblob, deadline) if nblob else b""
                if "progress" not in header:
                    break
                header.pop("out_end", None)
                wire.check(header, {"progress": int, "loss": wire.Opt(float)}, "progress")
                if on_progress is not None:
                    on_progress(header)
        except TimeoutError:
            self.kill()
            return Reply(failure="timeout", reason=f"no answer within {timeout:g} s", output=self._output())
        except EOFError:
            return Reply(failure="crash", reason=self._death(), output=self._output())
        except wire.WireError as exc:
            self.kill()
            return Reply(failure="protocol", reason=f"{MALFORMED} ({exc})", output=self._output())
        end = header.pop("out_end", None) if isinstance(header, dict) else None
        reply = Reply(header, body, output=self._output(end=end if type(end) is int else None))
        if self._watch:
            reply.changed = self._changed(self._watch.pop(0))
        return reply

    def _changed(self, inputs: dict) -> frozenset:
        """Return the inputs whose bytes in shared memory differ from what was written there."""
        changed = set()
        for name, (offset, nbytes) in inputs.items():
            original = self._originals.get(offset)
            if original is None or len(original) != nbytes:
                changed.add(name)
            elif self.shared[offset : offset + nbytes] != original:  # bytes against bytes: one memcmp
                changed.add(name)
        return frozenset(changed)

    def _write(self, data: bytes, deadline: float):
        if self.proc is not None:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                raise EOFError from None
            return
        view = memoryview(data).cast("B")
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            _, writable, _ = select.select([], [self.req_w], [], left)
            if writable:
                try:
                    view = view[os.write(self.req_w, view) :]
                except BrokenPipeError:
                    raise EOFError from None

    def _read(self, size: int, deadline: float) -> bytes:
        if self.proc is not None:
            return self._read_spawned(size, deadline)
        pending = self._pending  # one read takes what is there: a frame's prefix, header and body at once
        while len(pending) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            readable, _, _ = select.select([self.rep_r], [], [], left)
            if readable:
                chunk = os.read(self.rep_r, max(size - len(pending), 1 << 16))
                if not chunk:
                    raise EOFError
                pending += chunk
        data = bytes(pending[:size])
        del pending[:size]
        return data

    def _read_spawned(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                chunk = self._frames.get(timeout=left)
            except queue.Empty:
                raise TimeoutError from None
            if not chunk:
                raise EOFError
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _output(self, keep: int = 2000, end: int | None = None) -> str:
        """Return the tail of what the child printed since the last reply, up to where this reply's call ended.

        end: the output file's size when the child sent the reply (its own word, so only clamped into what was
        written since the last reply). Without it, a call sent while the previous reply was being judged could
        have its prints shown under the previous call. Read with pread: the child shares this file's offset.
        """
        if end is not None and end == self.out_pos:
            return ""  # nothing printed since the last reply, by the child's own word (its output is all it hides)
        try:
            fd = self.out.fileno()
            size = os.fstat(fd).st_size
            end = size if end is None else min(max(end, self.out_pos), size)
            start = max(self.out_pos, end - keep)
            self.out_pos = end
            return os.pread(fd, end - start, start).decode(errors="replace")
        except (OSError, ValueError):
            return ""

    # -- ending --------------------------------------------------------------------------------------------------

    def _death(self) -> str:
        """Reap a child that closed its pipe and say how it ended."""
        for _ in range(200):
            status = self._poll()
            if status is not None:
                self.alive = False
                return status
            time.sleep(0.005)
        self.kill()
        return "closed its connection to the grader"

    def _poll(self) -> str | None:
        if self.proc is not None:
            code = self.proc.poll()
            if code is None:
                return None
            if code < 0:
                return describe_signal(-code)
            return f"the process exited with code {code} (sys.exit or os._exit?)"
        if self.pidfd is not None:
            status = self.zygote.status(self.pid, wait=False)
            if status == -1:
                return "its sandbox could not be watched to the end (the zygote stopped)"
            return None if status is None else describe_status(status)
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid:
            costs.reaped(usage)
        return describe_status(status) if pid else None

    def kill(self):
        """Kill the child (and its session) and reap it without blocking."""
        if not self.alive:
            return
        self.alive = False
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            return
        if self.pidfd is not None:
            self.zygote.kill(self.pid, self.pidfd)
            _ZOMBIES.append((self.zygote, self.pid))
            return
        for target in (lambda: os.kill(self.pid, signal.SIGKILL), lambda: os.killpg(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        _ZOMBIES.append(self.pid)  # reaped without blocking: tearing down a torch-sized process takes ms
        reap()

    def close(self):
        """Stop the child and release its pipes and output file."""
        if self.proc is None and self.alive:
            try:  # a child between requests exits on its own when its request pipe closes
                os.close(self.req_w)
                self.req_w = -1
            except OSError:
                pass
        self.kill()
        if self.proc is None:
            for fd in (self.req_w, self.rep_r):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
        else:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        self.out.close()
        if getattr(self, "pidfd", None) is not None:
            os.close(self.pidfd)
            self.pidfd = None
        shared = getattr(self, "shared", None)
        if shared is not None:
            self.shared = None
            shared.close()
        room = getattr(self, "room", None)
        if room is not None:
            self.room = None
            if self.alive is False and self.proc is None:
                reap()
            self.jail.release_room(room)  # empty, and the child is gone or going: rmdir refuses anything else

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        reap(wait=True)


_ZOMBIES: list = []  # pids this process killed and must reap; (zygote, pid) for children a zygote reaps


def reap(wait: bool = False):
    """Reap killed children that have finished dying (all of them, when wait is true)."""
    for entry in list(_ZOMBIES):
        if isinstance(entry, tuple):  # the zygote reaps it: done once it has said how the child ended
            forker, pid = entry
            done = forker.status(pid, wait) is not None
        else:
            try:
                done, _, usage = os.wait4(entry, 0 if wait else os.WNOHANG)
                if done:
                    costs.reaped(usage)
            except ChildProcessError:
                done = entry
        if done:
            _ZOMBIES.remove(entry)


def describe_signal(sig: int) -> str:
    """Describe death by a signal in words a student understands."""
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    hint = {
        "SIGSEGV": " (a segmentation fault)",
        "SIGXCPU": " (CPU time limit)",
        "SIGKILL": " (killed, often for memory)",
        "SIGABRT": " (aborted)",
    }.get(name, "")
    return f"the process was killed by {name}{hint}"


def describe_status(status: int) -> str:
    """Describe a waitpid status in words a student understands."""
    if os.WIFSIGNALED(status):
        return describe_signal(os.WTERMSIG(status))
    if os.WIFEXITED(status):
        return f"the process exited with code {os.WEXITSTATUS(status)} (sys.exit or os._exit?)"
    return f"the process stopped (status {status})"
