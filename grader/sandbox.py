"""Run student code in a forked, jailed child process; the parent only ever sees plain tensors.

The parent (warm: torch imported, fixture and truth built) forks one child per submission. Before any student
code runs, the child scrubs every true gradient from its copy of memory, moves into its own process group,
network namespace and an empty chroot, drops to an unprivileged uid, takes rlimits on memory, CPU, processes
and output, and installs an import allow-list and autograd tripwires. The parent sends one request at a time and
waits with a deadline; a child that hangs, crashes or floods is killed with its whole process group.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import gc
import inspect
import linecache
import os
import resource
import select
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import torch
import torch.autograd.functional
import torch.func
import torch.nn.functional  # noqa: F401  (imported before the jail closes)

from grader import fixture, wire

# Modules a submission may import; each is imported here, before a child's file system goes away.
ALLOWED_IMPORTS = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.autograd",
    "torch.func",
    "torch.linalg",
    "torch.special",
    "math",
    "cmath",
    "numpy",
    "functools",
    "itertools",
    "collections",
    "collections.abc",
    "operator",
    "typing",
    "dataclasses",
    "random",
    "string",
    "statistics",
    "fractions",
    "numbers",
    "enum",
    "abc",
    "__future__",
)
for _name in ALLOWED_IMPORTS:
    try:
        __import__(_name)
    except ImportError:  # numpy is optional
        pass

NOBODY = 65534
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Limits:
    """Per-child resource limits."""

    timeout: float = 10.0  # wall seconds per request
    memory_mb: int = 2048  # address space a child may add on top of the warm parent
    output_bytes: int = 4 << 20  # stdout + stderr a child may write
    cpu_seconds: int = 600  # CPU seconds over the child's whole life


@dataclass
class Reply:
    """What came back for one request: a decoded header, or why nothing did."""

    header: dict = field(default_factory=dict)
    blob: bytes = b""
    failure: str | None = None  # "timeout" | "crash" | "protocol"
    reason: str = ""
    output: str = ""  # what the child printed while handling this request

    @property
    def ok(self) -> bool:
        return self.failure is None


class Jail:
    """An empty, root-owned directory that children chroot into."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="grader-jail-")
        os.chmod(self.path, 0o555)

    def close(self):
        try:
            os.chmod(self.path, 0o700)
            os.rmdir(self.path)
        except OSError:
            pass


_JAIL: Jail | None = None


def jail() -> Jail:
    """Return this process's jail directory, creating it once."""
    global _JAIL
    if _JAIL is None or not os.path.isdir(_JAIL.path):
        _JAIL = Jail()
    return _JAIL


# ---------------------------------------------------------------------------------------------------------------
# parent side


class Worker:
    """A sandboxed child holding one submission's sources; ask it one request at a time."""

    def __init__(self, sources: dict[str, tuple[str, str]], limits: Limits):
        self.limits = limits
        self.out = tempfile.TemporaryFile()
        self.out_pos = 0
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        jail_path = jail().path
        pid = os.fork()
        if pid == 0:  # child: never returns
            try:
                os.close(req_w)
                os.close(rep_r)
                _child_main(req_r, rep_w, self.out.fileno(), sources, limits, jail_path)
            except BaseException:  # noqa: B036 - report, never fall back into the parent's code
                traceback.print_exc()
            finally:
                os._exit(70)
        os.close(req_r)
        os.close(rep_w)
        self.pid = pid
        self.req_w, self.rep_r = req_w, rep_r
        os.set_blocking(req_w, False)
        self.alive = True

    def ask(self, request: dict, timeout: float | None = None, on_progress=None) -> Reply:
        """Send a request and wait for its reply, killing the child if it takes longer than the timeout.

        Frames whose header has a "progress" key come before the reply; each goes to on_progress(header).
        """
        if not self.alive:
            return Reply(failure="crash", reason="the sandbox process had already stopped")
        timeout = self.limits.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        enc = wire.Encoder()
        runs = [{**run, "sent": {k: enc.value(v) for k, v in run.get("sent", {}).items()}}
                for run in request.get("runs", ())]
        request = {**request, "runs": runs}
        data = wire.pack(request, enc.blob())
        try:
            self._write(data, deadline)
            while True:
                prefix = self._read(wire.PREFIX_SIZE, deadline)
                nhead, nblob = wire.read_lengths(prefix)
                header = wire.decode_header(self._read(nhead, deadline))
                blob = self._read(nblob, deadline) if nblob else b""
                if "progress" not in header:
                    break
                if on_progress is not None:
                    on_progress(header)
        except TimeoutError:
            self.kill()
            return Reply(failure="timeout", reason=f"no answer within {timeout:g} s", output=self._output())
        except EOFError:
            return Reply(failure="crash", reason=self._death(), output=self._output())
        except wire.WireError as exc:
            self.kill()
            return Reply(failure="protocol", reason=str(exc), output=self._output())
        return Reply(header, blob, output=self._output())

    def _write(self, data: bytes, deadline: float):
        view = memoryview(data)
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
        chunks, got = [], 0
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            readable, _, _ = select.select([self.rep_r], [], [], left)
            if readable:
                chunk = os.read(self.rep_r, min(size - got, 1 << 20))
                if not chunk:
                    raise EOFError
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def _output(self, keep: int = 2000) -> str:
        """Return the tail of what the child printed since the last request."""
        try:
            end = os.fstat(self.out.fileno()).st_size
            start = max(self.out_pos, end - keep)
            self.out_pos = end
            return os.pread(self.out.fileno(), end - start, start).decode(errors="replace")
        except OSError:
            return ""

    def _death(self) -> str:
        """Reap a child that closed its pipe and say how it ended."""
        for _ in range(50):
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.alive = False
                return describe_status(status)
            time.sleep(0.01)
        self.kill()
        return "closed its connection to the grader"

    def kill(self):
        """Kill the child's whole process group and reap it."""
        if not self.alive:
            return
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        self.alive = False
        _ZOMBIES.append(self.pid)  # reaped without blocking: tearing down a torch-sized process takes ms
        reap()

    def close(self):
        """Stop the child and release its pipes and output file."""
        self.kill()
        for fd in (self.req_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.out.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_ZOMBIES: list[int] = []


def reap():
    """Reap killed children that have finished dying, without waiting for the others."""
    for pid in list(_ZOMBIES):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _ZOMBIES.remove(pid)


def describe_status(status: int) -> str:
    """Describe a waitpid status in words a student understands."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        hint = {
            "SIGSEGV": " (a segmentation fault)",
            "SIGXCPU": " (CPU time limit)",
            "SIGKILL": " (killed, often for memory)",
            "SIGABRT": " (aborted)",
        }.get(name, "")
        return f"the process was killed by {name}{hint}"
    if os.WIFEXITED(status):
        return f"the process exited with code {os.WEXITSTATUS(status)} (sys.exit or os._exit?)"
    return f"the process stopped (status {status})"


# ---------------------------------------------------------------------------------------------------------------
# child side


class AutogradForbidden(RuntimeError):
    """Raised in a child when student code reaches for autograd."""


class BlockedImport(ImportError):
    """Raised in a child when student code imports something outside the allow-list."""


_AUTOGRAD_CALLS: list[str] = []
_IN_STUDENT = [False]  # True while student code runs; torch's own context managers may restore grad mode


def _tripwire(name: str):
    def tripped(*args, **kwargs):
        _AUTOGRAD_CALLS.append(name)
        raise AutogradForbidden(f"{name} is autograd; this exercise is to derive the gradient by hand")

    return tripped


def _install_autograd_tripwires():
    """Make every public autograd entry point record the call and refuse."""
    torch.Tensor.backward = _tripwire("Tensor.backward()")
    torch.Tensor.requires_grad_ = _tripwire("Tensor.requires_grad_()")
    torch.autograd.backward = _tripwire("torch.autograd.backward()")
    torch.autograd.grad = _tripwire("torch.autograd.grad()")
    for name in ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"):
        setattr(torch.autograd.functional, name, _tripwire(f"torch.autograd.functional.{name}()"))
    for name in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"):
        if hasattr(torch.func, name):
            setattr(torch.func, name, _tripwire(f"torch.func.{name}()"))
    enable = _tripwire("torch.enable_grad()")
    torch.enable_grad.__init__ = lambda self, *a, **k: enable()
    real_set_init = torch.set_grad_enabled.__init__
    refuse_set = _tripwire("torch.set_grad_enabled(True)")

    def set_grad_enabled_init(self, mode, *args, **kwargs):
        if mode and _IN_STUDENT[0]:
            refuse_set()
        real_set_init(self, mode, *args, **kwargs)

    torch.set_grad_enabled.__init__ = set_grad_enabled_init


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level:
        raise BlockedImport(f"relative import of {name!r} is blocked: each exercise file stands alone")
    if name not in ALLOWED_IMPORTS:
        allowed = ", ".join(n for n in ALLOWED_IMPORTS if n != "__future__")
        raise BlockedImport(f"import of {name!r} is blocked by the grader's sandbox; allowed modules: {allowed}")
    return __import__(name, globals, locals, fromlist, level)


_REMOVED_BUILTINS = ("open", "input", "breakpoint", "help", "exit", "quit", "copyright", "credits", "license")


def _student_builtins() -> dict:
    names = {k: v for k, v in vars(builtins).items() if k not in _REMOVED_BUILTINS}
    names["__import__"] = _guarded_import
    return names


def _set_limits(limits: Limits):
    """Take rlimits: address space above the warm baseline, CPU, output, no new processes, no core files."""
    with open("/proc/self/statm") as f:
        vm_bytes = int(f.read().split()[0]) * resource.getpagesize()
    address_space = vm_bytes + limits.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long print raises instead of killing


def _enter_jail(jail_path: str) -> dict:
    """Isolate the file system, network and identity as far as this OS and user allow."""
    status = {"netns": False, "chroot": False, "uid": os.getuid()}
    if os.getuid() == 0:
        status["netns"] = _LIBC.unshare(CLONE_NEWNET) == 0
    else:
        status["netns"] = _LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) == 0
    try:
        os.chroot(jail_path)
        os.chdir("/")
        status["chroot"] = True
    except OSError:
        pass
    if os.getuid() == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except OSError:
            pass
    status["uid"] = os.getuid()
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    return status


def _scrub_secrets():
    """Overwrite, in this child's copy of memory only, every true gradient the parent holds."""
    for fx in fixture.built_fixtures():
        for t in fx.secrets():
            t.zero_()
        fx.truth.clear()
        fx.steps.clear()
        fx.variants.clear()


def _child_main(req_r: int, rep_w: int, out_fd: int, sources, limits: Limits, jail_path: str):
    gc.freeze()  # the inherited heap is never collected here: a full collection would walk all of torch
    os.setsid()
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    keep = {0, 1, 2, req_r, rep_w}
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) not in keep:
            try:
                os.close(int(fd))
            except OSError:
                pass
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # the parent's may wrap another fd (pytest's capture)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    _scrub_secrets()
    torch.set_num_threads(1)
    for path, text in sources.values():
        linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    _set_limits(limits)  # reads /proc, so before the jail
    sandbox_status = _enter_jail(jail_path)
    _install_autograd_tripwires()
    ChildServer(req_r, rep_w, sources, sandbox_status).serve()


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__
        text = "<unprintable>"
    return text[:600]


def describe_exception(exc: BaseException, path: str | None) -> dict:
    """Name an exception and the student's line that raised it."""
    info = {"type": type(exc).__name__, "message": _safe_str(exc), "line": None, "code": None, "function": None}
    if isinstance(exc, SyntaxError) and exc.filename == path:
        info.update(line=exc.lineno, code=(exc.text or "").strip(), message=exc.msg)
        return info
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    except BaseException:
        frames = []
    if frames:
        info.update(line=frames[-1].lineno, code=(frames[-1].line or "").strip(), function=frames[-1].name)
    return info


class ChildServer:
    """The loop inside a child: load an exercise file, call a function, send the result."""

    def __init__(self, req_r, rep_w, sources, sandbox_status):
        self.req_r, self.rep_w = req_r, rep_w
        self.sources = sources
        self.status = sandbox_status
        self.modules: dict[str, dict] = {}
        self.fixtures = fixture.built_fixtures()

    def serve(self):
        while True:
            request = self._receive()
            if request is None:
                os._exit(0)
            op = request.get("op")
            handler = {"load": self.load, "call": self.call, "train": self.train}[op]
            header, blob = handler(request)
            self._send(header, blob)

    def _receive(self):
        prefix = self._read_exact(wire.PREFIX_SIZE)
        if prefix is None:
            return None
        nhead, nblob = wire.read_lengths(prefix)
        head, blob = self._read_exact(nhead), self._read_exact(nblob)
        if head is None or blob is None:
            return None
        request = wire.decode_header(head)
        for run in request.get("runs", ()):
            sent = {k: wire.decode_value(v, blob) for k, v in run.get("sent", {}).items()}
            run["sent"] = {k: v.tensor if isinstance(v, wire.Returned) else v for k, v in sent.items()}
        return request

    def _read_exact(self, size):
        chunks, got = [], 0
        while got < size:
            chunk = os.read(self.req_r, size - got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _send(self, header, blob=b""):
        try:
            frame = wire.pack(header, blob)
        except (TypeError, ValueError):
            frame = wire.pack({"ok": False, "error": {"type": "GraderError", "message": "unencodable reply"}})
        view = memoryview(frame)
        while view:
            view = view[os.write(self.rep_w, view) :]

    def load(self, request) -> tuple[dict, bytes]:
        """Execute an exercise file afresh and report its functions' parameter names."""
        exercise = request["exercise"]
        path, text = self.sources[exercise]
        namespace = {"__name__": f"submission_{exercise}", "__file__": path, "__builtins__": _student_builtins()}
        self.modules.pop(exercise, None)
        try:
            code = compile(text, path, "exec")
            with torch.no_grad():
                _IN_STUDENT[0] = True
                try:
                    exec(code, namespace)
                finally:
                    _IN_STUDENT[0] = False
        except BaseException as exc:  # noqa: B036 - a student's module may raise anything, SystemExit included
            return {"ok": False, "error": describe_exception(exc, path), "sandbox": self.status}, b""
        self.modules[exercise] = namespace
        functions = {}
        for name, obj in list(namespace.items()):
            if callable(obj) and not name.startswith("_"):
                functions[name] = self._signature(obj)
        return {"ok": True, "functions": functions, "sandbox": self.status}, b""

    @staticmethod
    def _signature(fn) -> dict:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return {"params": [], "error": "its signature cannot be read"}
        params, error = [], None
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                error = f"*{p.name}/**{p.name} cannot be bound: name each input you need as a parameter"
            else:
                params.append({"name": p.name, "default": p.default is not p.empty})
        return {"params": params, "error": error}

    def train(self, request) -> tuple[dict, bytes]:
        """Train the Ex4 network with the student's backward."""
        return _train_request(self, request)

    def call(self, request) -> tuple[dict, bytes]:
        """Call one student function once per run (e.g. both geometries); report each result."""
        exercise = request["exercise"]
        enc = wire.Encoder()
        headers = []
        for run in request["runs"]:
            if run.get("fresh"):  # re-execute the file, so no state survives from the previous run
                loaded, _ = self.load({"exercise": exercise})
                if not loaded["ok"]:
                    headers.append(loaded)
                    continue
            headers.append(self._call_one(exercise, request["function"], run, enc))
        return {"runs": headers}, enc.blob()

    def _call_one(self, exercise, function, run, enc) -> dict:
        """Call a student function with named inputs; report its result, mutations and autograd use."""
        path = self.sources[exercise][0]
        fn = self.modules.get(exercise, {}).get(function)
        local = self.fixtures[run["fixture"]].inputs() if run.get("fixture") is not None else {}
        args = {name: _fresh(local[name]) for name in run.get("local", ())}
        args.update(run.get("sent", {}))
        pristine = {k: v.clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
        del _AUTOGRAD_CALLS[:]
        header: dict = {"ok": True}
        try:
            with torch.no_grad():
                _IN_STUDENT[0] = True
                try:
                    value = fn(**args)
                finally:
                    _IN_STUDENT[0] = False
                if torch.is_grad_enabled():
                    _AUTOGRAD_CALLS.append("torch.set_grad_enabled(True)")
            header["value"] = enc.value(value)
        except BaseException as exc:  # noqa: B036 - SystemExit and friends are student failures too
            header = {"ok": False, "error": describe_exception(exc, path)}
            if isinstance(exc, MemoryError) or "can't allocate memory" in header["error"]["message"]:
                header["error"]["memory"] = True
        mutated = {}
        for name, before in pristine.items():
            after = args[name]
            try:
                changed = not (after.shape == before.shape and torch.equal(after, before))
            except BaseException:  # noqa: B036
                changed = True
            if changed:
                mutated[name] = enc.value(after)
        header["mutated"] = mutated
        header["autograd"] = sorted(set(_AUTOGRAD_CALLS))
        return header


def _train_request(server: ChildServer, request) -> tuple[dict, bytes]:
    """Run `grade ex4 --full`'s SGD loop on the student's backward; the parent evaluates the result."""
    from grader import corpus as corpus_mod
    from grader import training

    fn = server.modules.get("ex4", {}).get("backward")
    path = server.sources["ex4"][0]

    @functools.wraps(fn)
    def student_backward(**kwargs):
        _IN_STUDENT[0] = True
        try:
            return fn(**kwargs)
        finally:
            _IN_STUDENT[0] = False

    every = max(1, request["steps"] // 100)

    def progress(step, loss):
        server._send({"progress": step, "loss": loss})

    enc = wire.Encoder()
    try:
        corpus = corpus_mod.load(request.get("data"))
        params, losses, diverged_at, seconds = training.sgd(
            student_backward, corpus, request["steps"], progress=progress, progress_every=every
        )
    except BaseException as exc:  # noqa: B036 - the student's code runs inside this loop
        return {"ok": False, "error": describe_exception(exc, path), "autograd": sorted(set(_AUTOGRAD_CALLS))}, b""
    header = {
        "ok": True,
        "params": {k: enc.value(v) for k, v in params.items()},
        "losses": enc.value(torch.tensor(losses, dtype=torch.float32)),
        "diverged_at": diverged_at,
        "seconds": seconds,
    }
    return header, enc.blob()


def _fresh(value):
    return value.clone() if isinstance(value, torch.Tensor) else value
