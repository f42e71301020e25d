"""A warm process for `grade exN`: torch imported once, a fresh fork of it per run (Linux, fork backend).

A student command that finds no warm process grades in-process as always, then starts one as it exits: a
background interpreter that imports torch and the grader, and nothing else. A later student command (the client)
connects to it over a Unix socket in a folder only its user can open, and hands over its argv, environment,
umask, working folder and standard streams (the descriptors themselves). The warm process forks a worker per
run, which takes them on and runs the `grade` command exactly as in-process: the truth server and the sandbox
are forked from it, with every wall, as from an in-process run. The warm process never holds a submission, a
truth or a student's output: each worker is a fresh fork of a process that has only imported modules (and holds
the requests of the same user's runs waiting beside it, which the worker forgets as it starts).

The client relays Ctrl-C and Ctrl-Z (to the worker's process group, as a terminal does), TERM and HUP, and exits
with the worker's status. A client that goes away before the worker ends has it sent TERM. The warm process serves only
clients whose key matches its own (the interpreter, its flags, the grader's and the installed packages' files,
the environment an import reads, the user, the namespaces, capabilities and limits), so a run is graded as the
client's own process would have graded it; it ends after IDLE_S idle seconds, when a newer one starts, or on
`grade warm --stop`. Any failure on the way falls back to grading in-process, silently. GRADER_WARM=0 turns
it off.

Nothing here imports torch or click until the warm process itself starts.
"""

from __future__ import annotations

import os
import signal
import struct
import sys

ENV = "GRADER_WARM"  # "0" (or off, no, false): never use or start a warm process
IDLE_ENV = "GRADER_WARM_IDLE"  # seconds a warm process waits for a run before it ends (default IDLE_S)
IDLE_S = 600
MAX_REQUEST = 1 << 20  # bytes of a run's request (argv and environment); longer ones are refused
MAX_PENDING = 64  # connections whose request is still arriving; more are closed at once
REQUEST_S = 5.0  # seconds a request has to arrive, and its client to say go, before it is dropped
TAKEN_S = 5.0  # seconds a client waits to hear its run taken ('P') before it grades in-process
WENT_AWAY = "grade: the warm process ended before this run did; run grade again (GRADER_WARM=0: without it)"
_RECORD = struct.Struct("!ci")  # a tag and a 32-bit number: every message after the request
_HEADER = struct.Struct("!cI")  # the request's tag and length
# what an import reads from the environment (python, torch, numpy, their math libraries, the C library, locale)
_IMPORT_ENV = (
    "PYTHON", "LD_", "OMP_", "MKL_", "OPENBLAS_", "GOTO", "KMP_", "ATEN_", "TORCH", "PYTORCH_", "CUDA", "NUMPY_",
    "MALLOC_", "GLIBC_", "GOMP_", "LC_", "LANG", "TMPDIR", "TZ", "HOME", "VIRTUAL_ENV", "CONDA_PREFIX",
    "GRADER_SANDBOX",
)  # fmt: skip
# the warm process's first line: its imports look where this process's looked (`python -m` put the working
# folder first, the console script its own folder), and it checks it has the key it is started for (_main)
_LAUNCH = "import sys; sys.path[0] = sys.argv[1]; from grader.cli import warm; warm._main(*sys.argv[2:])"
_SERVED: list = []  # the worker's connection to its client, once the warm process has forked it
_IMPORT_NOISE: list = []  # what the warm process's imports printed on stderr, said again by each run
_HANDED: list = []  # the worker's pid, once it said it has this run ('W')
_TO_START: list = []  # (folder, key) of a warm process an in-process run starts as it exits


def enabled() -> bool:
    """Whether a student command may use or start a warm process here."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return False
    if sys.platform != "linux" or os.getpid() == 1 or not hasattr(__import__("socket"), "send_fds"):
        return False  # fork is the backend on Linux only; a PID 1 takes everything it starts with it
    return os.environ.get("GRADER_SANDBOX", "").strip().lower() != "spawn" and not _SERVED


def folder() -> str | None:
    """Return this user's folder of warm processes (made 0700 if missing), or None if it is not safely ours."""
    base = os.environ.get("TMPDIR") or "/tmp"
    path = os.path.join(base, f"grade-warm-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # a link, or a folder someone else made or can open: not a place for our socket
    return path if len(path) < 80 else None  # a socket's path must fit in 108 bytes


def key() -> str:
    """Return what a warm process must share with this one to grade a run as this one would."""
    import resource

    try:
        from _blake2 import blake2b  # hashlib's own, without hashlib loading OpenSSL (~12 ms of every served run)
    except ImportError:  # an interpreter built without it
        from hashlib import blake2b

    h = blake2b(digest_size=10)

    def add(*parts) -> None:
        for part in parts:
            h.update(repr(part).encode() + b"\0")

    add(os.getuid(), os.getgid(), sorted(os.getgroups()), sys.executable, sys.version, tuple(sys.flags))
    add(sys.warnoptions, sys._xoptions)  # sys.path[1:] below, with each folder's stamp
    add(sorted((k, v) for k, v in os.environ.items() if k.startswith(_IMPORT_ENV)))
    add([resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")])
    add(sorted(os.sched_getaffinity(0)))  # torch sizes its thread pool from it
    for ns in ("pid", "mnt", "user", "net", "ipc", "uts", "cgroup"):
        add(_read_link(f"/proc/self/ns/{ns}"))
    try:
        with open("/proc/self/status") as f:
            add([line for line in f if line.startswith(("Cap", "Seccomp", "NoNewPrivs"))])
        with open("/proc/self/cgroup") as f:
            add(f.read())
    except OSError:
        add(None)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            add(name, _stamp(os.path.join(root, name)))
    add([(p, _stamp(p)) for p in sys.path[1:]])  # a package installed or removed changes its folder
    return h.hexdigest()


def _read_link(path: str):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


# ---- the client: a student command run by a warm process ----


def client(argv: list[str], interrupted: list) -> int | None:
    """Have a warm process run this student command; return its exit status, or None to grade in-process.

    With none to serve it, note one to start as this process exits (start_noted). `interrupted` is the Ctrl-C
    noted so far (grader.cli): one before the run is handed over ends it here.
    """
    where = folder()
    if where is None:
        return None
    for fd in (0, 1, 2):  # a closed one is /dev/null to the worker, and never the socket's number
        if not _is_open(fd):
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
    mine = key()
    sock = _connect(os.path.join(where, f"{mine}.sock"))
    if sock is None:
        _TO_START.append((where, mine))
        return None
    with sock:
        return _hand_over(sock, argv, interrupted)


def _connect(path: str):
    """Return a socket connected to the warm process at path, if there is one and it is this user's."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(path)
        if _peer_uid(sock) != os.getuid():
            raise OSError("not this user's")
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    return sock


def _peer_uid(sock) -> int:
    import socket

    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _hand_over(sock, argv: list[str], interrupted: list) -> int | None:
    """Send the run; once taken, say go with this process's streams and folder, and relay signals until the
    worker's status comes back. None if it was never taken: no worker exists, grade in-process."""
    import json
    import socket

    unbuffered = bool(getattr(sys.stdout, "write_through", False))  # -u, or PYTHONUNBUFFERED
    request = json.dumps({"argv": argv, "env": dict(os.environ), "umask": _umask(), "unbuffered": unbuffered})
    request = request.encode()
    if len(request) > MAX_REQUEST:
        return None
    try:
        sock.settimeout(TAKEN_S)  # a stalled warm process that stops reading: grade in-process
        sock.sendall(_HEADER.pack(b"R", len(request)) + request)
    except OSError:
        return None
    taken = _wait_until_taken(sock, interrupted)
    if taken is not True:
        return taken  # None: grade in-process; 1: a Ctrl-C came first, and "Aborted!" is said
    relayed = {signal.SIGINT: b"I", signal.SIGTERM: b"T", signal.SIGHUP: b"H", signal.SIGTSTP: b"Z"}

    def relay(sig, frame) -> None:
        try:
            sock.send(_RECORD.pack(relayed[sig], 0))
        except OSError:
            pass
        if sig == signal.SIGTSTP:  # Ctrl-Z: the worker's group is stopped; stop here too, as the shell expects
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTSTP)
            signal.signal(signal.SIGTSTP, relay)  # here once the shell continues this process (fg, bg)
            try:
                sock.send(_RECORD.pack(b"C", 0))
            except OSError:
                pass

    # go, with the streams and the working folder: sent only now that the warm process answers, so none is held
    # in a stalled one's queue (a reader of this run's output would wait for it)
    try:
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            socket.send_fds(sock, [_RECORD.pack(b"G", 0)], [0, 1, 2, cwd])
        finally:
            os.close(cwd)
    except OSError:
        return None  # no worker without it
    before = {sig: signal.signal(sig, relay) for sig in relayed if signal.getsignal(sig) is not signal.SIG_IGN}
    status = None
    try:
        if interrupted:  # a Ctrl-C just now: the worker says "Aborted!" as the run would
            relay(signal.SIGINT, None)
        status = _wait_for_status(sock)
        return status
    finally:
        if status is not None:  # the run is over: a Ctrl-C from now on comes too late, as after an in-process run's
            before[signal.SIGINT] = signal.SIG_IGN  # end (a restored handler would raise in the next lines)
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _wait_until_taken(sock, interrupted: list):
    """Wait for the warm process to take the run ('P'): True; None if it does not within TAKEN_S (or goes away);
    1 once "Aborted!" is said for a Ctrl-C that came first. Until the client says go, no worker exists."""
    import time

    from grader.cli import ABORTED

    deadline = time.monotonic() + TAKEN_S
    sock.settimeout(0.05)
    try:
        while not interrupted:
            if time.monotonic() > deadline:
                return None
            try:
                got = sock.recv(_RECORD.size)
            except TimeoutError:
                continue
            except OSError:
                return None
            if len(got) < _RECORD.size:  # gone, or a short record: not a warm process to trust
                return None
            return True if got[:1] == b"P" else None
    finally:
        sock.settimeout(None)
    _say(f"\n{ABORTED}")
    return 1


def _wait_for_status(sock) -> int | None:
    """Read records until the worker's exit status ('X') or its death ('D': a wait status). None if the warm
    process lets go before a worker says it has the run ('W'): none has, so grade in-process."""
    buffer = b""
    while True:
        try:
            chunk = sock.recv(64)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            if not _HANDED:
                return None
            _say(WENT_AWAY)
            return 1
        buffer += chunk
        while len(buffer) >= _RECORD.size:
            tag, number = _RECORD.unpack(buffer[: _RECORD.size])
            buffer = buffer[_RECORD.size :]
            if tag == b"W":
                _HANDED.append(number)
            elif tag == b"X":
                return number
            elif tag == b"D":
                if os.WIFSIGNALED(number):  # end as the run ended: the shell says "Killed", say
                    try:
                        signal.signal(os.WTERMSIG(number), signal.SIG_DFL)
                    except (OSError, ValueError):  # KILL and STOP have no handler to reset
                        pass
                    os.kill(os.getpid(), os.WTERMSIG(number))
                return os.waitstatus_to_exitcode(number) if os.WIFEXITED(number) else 1


def handed_over() -> bool:
    """Whether a worker has this run: from then on it must never be graded here as well."""
    return bool(_HANDED)


def _say(line: str) -> None:
    """Write a line to fd 2, if it is open (sys.stderr is None when this process started with it closed)."""
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def noted() -> bool:
    """Whether client() found no warm process to serve it, and one may be started as this process exits."""
    return bool(_TO_START)


def start_noted() -> None:
    """Start the warm process noted by client(), in the background, unless one is starting already."""
    while _TO_START:
        where, mine = _TO_START.pop()
        if _locked(os.path.join(where, f"{mine}.lock")) or _failed_lately(os.path.join(where, f"{mine}.failed")):
            continue  # one is starting; or one failed to within the hour, for this key: not again on every run
        import subprocess

        from grader.sandbox import jail

        jail.flush_standard_streams()  # what this run printed goes out first
        try:
            first = os.path.abspath(sys.path[0]) if sys.path and sys.path[0] else os.getcwd()
            subprocess.Popen(
                [sys.executable, *subprocess._args_from_interpreter_flags(), "-c", _LAUNCH, first, where, mine],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        except OSError:
            pass


def _failed_lately(path: str) -> bool:
    import time

    try:
        return time.time() - os.stat(path).st_mtime < 3600
    except OSError:
        return False


def _locked(path: str) -> bool:
    """Whether a warm process holds (or is starting with) the lock at path."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


# ---- `grade warm`: what runs, and stopping it ----


def status(stop: bool = False) -> list[dict]:
    """Return each of this user's warm processes ({pid, key, served, up_s, idle_s, ours}); stop them if asked."""
    import json

    where = folder()
    if where is None:
        return []
    mine, found = key(), []
    for name in sorted(os.listdir(where)):
        if not name.endswith(".sock"):
            continue
        sock = _connect(os.path.join(where, name))
        if sock is None:
            continue
        with sock:
            try:
                sock.sendall(_HEADER.pack(b"S" if stop else b"Q", 0))
                sock.settimeout(2.0)
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
                found.append({**json.loads(reply), "ours": name == f"{mine}.sock"})
            except (OSError, ValueError):
                continue
    return found


def off_line() -> str:
    """Say why no warm process is used here."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return f"no warm process: {ENV}={os.environ[ENV]} turns it off; every grade exN imports torch itself"
    return "no warm process here (Linux only, fork backend): every grade exN imports torch itself"


def status_lines(found: list[dict], stopped: bool = False) -> list[str]:
    """Describe this user's warm processes (status()), one line each, or that there is none."""
    if not found:
        return ["no warm process: the next grade exN starts one as it ends (GRADER_WARM=0 turns that off)"]
    lines = []
    for w in found:
        which = "for this environment" if w["ours"] else "for another environment (other settings or grader files)"
        state = "stopping once its runs end" if stopped else f"ends after {w['idle_limit_s']:g} idle seconds"
        lines.append(
            f"warm process {w['pid']} {which}: up {w['up_s']:g} s, {w['served']} run(s) served, "
            f"{w['running']} running; {state}"
        )
    return lines


# ---- the warm process ----


class _Pending:
    """A connection whose request is still arriving, or whose client has yet to say go."""

    def __init__(self, conn, deadline: float):
        self.conn, self.deadline = conn, deadline
        self.data, self.fds, self.request = b"", [], None

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.conn.close()


class _Warm:
    """The warm process's state: its socket, the connections being read, its workers and their clients."""

    def __init__(self, where: str, mine: str):
        import selectors
        import time

        self.where, self.key = where, mine
        self.path = os.path.join(where, f"{mine}.sock")
        self.selector = selectors.DefaultSelector()
        self.pending: dict = {}  # connection -> _Pending, until its worker is forked
        self.workers: dict = {}  # worker pid -> its client's connection
        self.partial: dict = {}  # worker pid -> the start of a record its client has not finished sending
        self.fds: list[int] = [self.selector.fileno()]  # every descriptor a worker must not keep
        self.served, self.started, self.last = 0, time.time(), time.monotonic()
        self.pid = os.getpid()
        self.stopping = False
        self.listener = None
        self.inode = None

    def listen(self) -> None:
        """Take the socket's path (a stale one removed) and listen on it, readable by this user alone."""
        import selectors
        import socket

        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(self.path)
        finally:
            os.umask(old)
        self.inode = os.stat(self.path).st_ino
        self.listener.listen(32)
        self.listener.setblocking(False)
        self.fds.append(self.listener.fileno())
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")

    def serve(self) -> None:
        """Serve runs until idle, stopped or replaced; then leave. Nothing here blocks on a client."""
        import selectors
        import time

        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.fds += [wake_r, wake_w]
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda sig, frame: None)
        signal.signal(signal.SIGTERM, lambda sig, frame: self.stop())
        self.selector.register(wake_r, selectors.EVENT_READ, "wake")
        idle = _idle_seconds()
        while True:
            self.reap()
            now = time.monotonic()
            for late in [p for p in self.pending.values() if p.deadline < now]:
                self.forget(late)  # a request that did not arrive, or a client that never said go, in time
            if self.stopping and not self.workers:
                return
            if not self.workers and not self.pending and now - self.last > idle:
                return
            for selected, _ in self.selector.select(timeout=0.5):
                what = selected.data
                if what == "accept":
                    self.accept()
                elif what == "wake":
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                elif isinstance(what, _Pending):
                    self.read_request(what)
                else:
                    self.from_client(selected.fileobj, what)
            if self.workers or self.pending:
                self.last = time.monotonic()

    def accept(self) -> None:
        import selectors
        import time

        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        if _peer_uid(conn) != os.getuid() or len(self.pending) >= MAX_PENDING:
            conn.close()
            return
        conn.setblocking(False)
        pending = _Pending(conn, time.monotonic() + REQUEST_S)
        self.pending[conn] = pending
        self.selector.register(conn, selectors.EVENT_READ, pending)

    def read_request(self, p: _Pending) -> None:
        """Read what has arrived of a request (its descriptors come with its first bytes); answer a status query,
        say 'P' once a run's request is whole, fork its worker once the client says go ('G')."""
        import json
        import socket
        import time

        try:
            data, fds, _, _ = socket.recv_fds(p.conn, 65536, 4)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        p.fds += fds
        if not data or len(p.fds) > 4 or len(p.data) + len(data) > _HEADER.size + MAX_REQUEST + 64:
            self.forget(p)
            return
        p.data += data
        try:
            if p.request is None:
                if len(p.data) < _HEADER.size:
                    return
                tag, length = _HEADER.unpack(p.data[: _HEADER.size])
                if tag in (b"Q", b"S"):
                    p.conn.setblocking(True)
                    p.conn.settimeout(1.0)
                    p.conn.sendall(json.dumps(self.describe()).encode())
                    if tag == b"S":
                        self.stop()
                    self.forget(p)
                    return
                if tag != b"R" or length > MAX_REQUEST or self.stopping:
                    self.forget(p)
                    return
                if len(p.data) < _HEADER.size + length:
                    return
                request = json.loads(p.data[_HEADER.size : _HEADER.size + length])
                if p.fds or not _well_formed(request):
                    self.forget(p)
                    return
                p.request, p.data = request, p.data[_HEADER.size + length :]
                p.conn.send(_RECORD.pack(b"P", 0))  # taken: the client may still give up, until it says go
                p.deadline = time.monotonic() + REQUEST_S  # its time to say go starts now
            if not p.data:
                return
            if len(p.data) < _RECORD.size:
                return
            if p.data[:1] != b"G" or len(p.fds) != 4:  # go comes with the streams and the working folder
                self.forget(p)
                return
        except (OSError, ValueError):
            self.forget(p)
            return
        records = p.data[_RECORD.size :]
        self.selector.unregister(p.conn)
        del self.pending[p.conn]
        pid = self.fork_worker(p.conn, p.fds, p.request)
        for fd in p.fds:
            os.close(fd)
        if pid is None:
            p.conn.close()
            return
        self.relay(pid, records)  # a Ctrl-C said right after go

    def forget(self, p: _Pending) -> None:
        self.pending.pop(p.conn, None)
        try:
            self.selector.unregister(p.conn)
        except (KeyError, ValueError):
            pass
        p.close()

    def fork_worker(self, conn, fds: list[int], request: dict) -> int | None:
        """Fork the run's worker, its signals held until it has its own handlers; None if no fork was possible."""
        import selectors

        held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
            return None
        if pid == 0:
            others = [*self.fds, *(c.fileno() for c in self.workers.values())]
            for p in self.pending.values():  # other clients' connections, descriptors and requests: never a worker's
                others += [p.conn.fileno(), *p.fds]
                p.request, p.data = None, b""
            try:
                _run_worker(conn, fds, request, [fd for fd in others if fd != conn.fileno() and fd >= 0], held)
            except BaseException:
                import traceback

                traceback.print_exc()  # the client's stderr, once the worker has taken it on
            finally:
                os._exit(70)
        try:
            os.setpgid(pid, pid)  # here too, so a Ctrl-C relayed at once reaches its group (ESRCH otherwise)
        except OSError:
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        self.served += 1
        self.workers[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)
        return pid

    def from_client(self, conn, pid: int) -> None:
        """Relay a client's signals to its worker; a client gone before its worker ends has it sent TERM."""
        try:
            data = conn.recv(_RECORD.size * 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.drop(conn)
            if pid in self.workers:  # unwind, as a killed in-process run's children do; continued if Ctrl-Z stopped it
                _signal(pid, signal.SIGTERM)
                _signal(-pid, signal.SIGCONT)
            return
        self.relay(pid, data)

    def relay(self, pid: int, data: bytes) -> None:
        """Relay whole records of a client's signals to its worker (a record split between reads waits)."""
        data = self.partial.pop(pid, b"") + data
        whole = len(data) - len(data) % _RECORD.size
        if whole < len(data):
            self.partial[pid] = data[whole:]
        for start in range(0, whole, _RECORD.size):
            tag, _ = _RECORD.unpack(data[start : start + _RECORD.size])
            if tag == b"I":
                _signal(-pid, signal.SIGINT)  # the process group, as a terminal's Ctrl-C
            elif tag == b"H":
                _signal(-pid, signal.SIGHUP)
            elif tag == b"T":
                _signal(pid, signal.SIGTERM)
            elif tag == b"Z":
                _signal(-pid, signal.SIGSTOP)  # Ctrl-Z stops the terminal's whole foreground group
            elif tag == b"C":
                _signal(-pid, signal.SIGCONT)

    def drop(self, conn) -> None:
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def reap(self) -> None:
        """Reap ended workers; tell a client whose worker died without its status how it ended."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            self.partial.pop(pid, None)
            if conn is not None and conn.fileno() >= 0:
                try:
                    conn.setblocking(True)
                    conn.settimeout(1.0)
                    conn.sendall(_RECORD.pack(b"D", status))
                except OSError:
                    pass
                self.drop(conn)

    def stop(self) -> None:
        """Take no more runs: leave the socket's path to a newer warm process, end once the workers have."""
        if os.getpid() != self.pid:
            return  # a worker's, before it put its own handlers in place
        self.stopping = True
        if self.listener is not None:
            try:
                if os.stat(self.path).st_ino == self.inode:
                    os.unlink(self.path)
            except OSError:
                pass
            self.fds.remove(self.listener.fileno())  # its number is free again: the next client's descriptor may get it
            self.drop(self.listener)
            self.listener = None
        for p in [p for p in self.pending.values() if p.request is None]:
            self.forget(p)  # one told it is taken is still forked once its client says go (or dropped when late)

    def describe(self) -> dict:
        import time

        return {
            "pid": os.getpid(),
            "key": self.key,
            "served": self.served,
            "running": len(self.workers),
            "up_s": round(time.time() - self.started, 1),
            "idle_limit_s": _idle_seconds(),
        }


def _well_formed(request) -> bool:
    """Whether a run's request has the types a worker takes: argv a list of str, env str to str, umask an int."""
    return (
        isinstance(request, dict)
        and isinstance(request.get("argv"), list)
        and all(isinstance(a, str) for a in request["argv"])
        and isinstance(request.get("env"), dict)
        and all(isinstance(k, str) and isinstance(v, str) and "=" not in k and "\0" not in k + v
                for k, v in request["env"].items())
        and type(request.get("umask")) is int
        and isinstance(request.get("unbuffered", False), bool)
    )  # fmt: skip


def _idle_seconds() -> float:
    try:
        return max(0.5, float(os.environ.get(IDLE_ENV, IDLE_S)))
    except ValueError:
        return float(IDLE_S)


def _signal(target: int, sig: int) -> None:
    try:
        if target < 0:
            os.killpg(-target, sig)
        else:
            os.kill(target, sig)
    except OSError:
        pass


def _run_worker(conn, fds: list[int], request: dict, others: list[int], held: set) -> None:
    """In the forked worker: take on the client's streams, folder, umask, environment and argv; run `grade`.

    Its signals are held (fork_worker) until it has the handlers an in-process run starts with: a Ctrl-C relayed
    meanwhile is noted, and ends the run with "Aborted!" as one during an in-process run's start does.
    """
    import grader.cli

    for fd in others:
        try:
            os.close(fd)
        except OSError:
            pass
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    grader.cli._NOTING.append(signal.default_int_handler)  # put back by imports_done(), as in-process
    signal.signal(signal.SIGINT, grader.cli._note_interrupt)
    os.setpgid(0, 0)  # the client relays Ctrl-C to this group: this process, the truth server, the sandbox
    signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    conn.setblocking(True)
    _SERVED.append(conn)
    os.register_at_fork(after_in_child=_let_go_of_client)  # the truth server, the sandbox: none holds it
    conn.sendall(_RECORD.pack(b"W", os.getpid()))  # this worker has the run: the client may no longer grade it
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    os.fchdir(fds[3])
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)  # only 0-2 hold the client's streams: the processes this one forks inherit no other copy
    os.umask(request["umask"] & 0o777)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["grade", *request["argv"]]
    _reopen_standard_streams(bool(request.get("unbuffered")))
    if _IMPORT_NOISE:  # what importing torch said on stderr (a warning, say), as the run's own import would
        os.write(2, _IMPORT_NOISE[0])
    from grader.truth import fixture

    fixture.new_run_key()  # the hidden geometries of a run without a course secret are its own, as in-process
    from grader.cli import main as cli_main
    from grader.sandbox.jail import set_name

    set_name("grade")
    cli_main.BEFORE_EXIT.append(_report)
    code = 1
    try:
        grader.cli.run()  # ends in os._exit through cli_main.run, having reported; only an early exit comes back
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()  # as the interpreter itself would print it, on the client's stderr
    import atexit

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ended: a late Ctrl-C would only break a handler below
    atexit._run_exitfuncs()
    _report(code)
    os._exit(code)


def _let_go_of_client() -> None:
    """In a child the worker forks: close its connection to the client (only the worker reports the status)."""
    while _SERVED:
        _SERVED.pop().close()


def _report(code: int) -> None:
    """Flush what the run printed, then send the client its exit status."""
    from grader.sandbox import jail

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the client may leave as soon as it has the status
    jail.flush_standard_streams()
    while _SERVED:
        conn = _SERVED.pop()
        try:
            conn.sendall(_RECORD.pack(b"X", code))
        except OSError:
            pass


def _reopen_standard_streams(unbuffered: bool) -> None:
    """Make sys.stdin/stdout/stderr those of the client's descriptors, buffered as its interpreter had them."""
    import io

    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        old = getattr(sys, name)
        raw = open(fd, mode + "b", buffering=0 if unbuffered and mode == "w" else -1, closefd=False)
        stream = io.TextIOWrapper(
            raw,
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=name == "stderr" or (mode == "w" and os.isatty(fd)),
            write_through=unbuffered and mode == "w",
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _main(where: str, mine: str) -> None:
    """The warm process: lock, import, check its key, listen, serve, leave (started by _LAUNCH).

    A failure to start, or a key other than the one it was started for (it imported another grader, say), is
    noted in KEY.failed: runs with this key then grade in-process, and none is started for it within the hour.
    """
    import fcntl

    from grader.sandbox.jail import set_name

    set_name("grade-warm")
    path = os.path.join(where, f"{mine}.lock")
    lock = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(lock).st_ino != os.stat(path).st_ino:
            raise OSError("the lock file was replaced meanwhile")  # one that left unlinked it: start afresh
    except OSError:
        os._exit(0)  # another is starting or serving this key
    warm = _Warm(where, mine)
    try:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        _import_quietly()
        if key() != mine:
            raise RuntimeError(f"started for key {mine}, has key {key()}: it would not grade as its clients do")
        warm.fds.append(lock)
        status(stop=True)  # one warm process per user: the older ones leave once their runs end
        warm.listen()
    except BaseException:  # noqa: B036 - whatever stopped it, no run waits on it
        with open(os.path.join(where, f"{mine}.failed"), "w") as f:
            import traceback

            traceback.print_exc(file=f)
        os._exit(1)
    import gc

    gc.collect()
    gc.freeze()  # a worker's collections skip what it shares with this process
    try:
        warm.serve()
    finally:
        warm.stop()
        try:
            os.unlink(path)
        except OSError:
            pass
    os._exit(0)


def _import_quietly() -> None:
    """Import what a run imports, keeping what the imports print on stderr for each run to print (_IMPORT_NOISE)."""
    import tempfile

    from grader.sandbox import jail

    with tempfile.TemporaryFile() as noise:
        os.dup2(noise.fileno(), 2)
        try:
            _import_what_a_run_imports()
        finally:
            if sys.stderr is not None:
                sys.stderr.flush()
            jail.quiet_standard_streams((2,))
        noise.seek(0)
        said = noise.read(1 << 16)
    if said:
        _IMPORT_NOISE.append(said)


def _import_what_a_run_imports() -> None:
    """Import torch, the grader's modules a student command uses and the modules a sandbox lets a submission use."""
    import torch  # noqa: F401

    import grader.cli.main  # noqa: F401
    import grader.grading.runner  # noqa: F401
    import grader.submissions.notebook.submission  # noqa: F401
    import grader.truth.server  # noqa: F401
    from grader.sandbox import child

    child.import_allowed()
