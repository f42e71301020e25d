"""The walls around one sandbox child: namespaces, an empty root, its own uid, rlimits and no environment.

Each wall stops something different (see README, "The sandbox"):
- its own PID namespace: the child sees and can signal no process but itself (kill(-1, ...) hits nothing);
- its own IPC namespace with every SysV limit at 0: no shared memory that outlives it or escapes its rlimits;
- its own network namespace: no network, not even loopback;
- chroot into an empty, root-owned directory: no files to read or write;
- a uid of its own per concurrent slot: a second wall between neighbours; NPROC 0: no new processes;
- rlimits on address space, CPU seconds, file size (its output) and core dumps; no environment variables;
- the parent-death signal, set after the uid switch: it dies with the grader.
Where the kernel or the platform refuses one of them, `Protections` says which, and the others still apply.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import os
import resource
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_NO_NEW_PRIVS = 1, 4, 15, 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SANDBOX_UID_BASE = 2_100_000_000  # uid of slot k is SANDBOX_UID_BASE + k: far above any real account
IPC_LIMITS = ("shmmax", "shmall", "shmmni", "msgmni")
JAIL_PREFIX = "grader-jail-"

_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None  # libc, already loaded: no ldconfig run


@dataclass(frozen=True)
class Protections:
    """Which walls a sandbox child gets on this machine."""

    pid_ns: bool = False
    ipc_ns: bool = False
    ipc_limits: bool = False
    net_ns: bool = False
    user_ns: bool = False
    chroot: bool = False
    own_uid: bool = False
    rlimits: bool = False
    seccomp: bool = False
    backend: str = "fork"

    def missing(self) -> list[str]:
        """Return the walls this machine does not give, in words."""
        names = {
            "pid_ns": "own PID namespace (a submission could signal other processes of the same user)",
            "ipc_ns": "own IPC namespace (SysV shared memory outliving the sandbox)",
            "ipc_limits": "SysV shared memory limits (memory outside the address-space limit)",
            "net_ns": "own network namespace (network access)",
            "chroot": "empty file system (files the grading user can read)",
            "own_uid": "own uid per sandbox",
            "rlimits": "memory, CPU and output limits",
            "seccomp": "system-call filter (kernel keyrings, memfd, ptrace)",
        }
        return [text for key, text in names.items() if not getattr(self, key)]

    def to_dict(self) -> dict:
        """Return the protections for summary.json."""
        return {"backend": self.backend, "missing": self.missing()}


def sandbox_uid(slot: int) -> int:
    """Return the uid of a concurrent sandbox slot."""
    return SANDBOX_UID_BASE + slot


class Jail:
    """An empty, root-owned directory with an empty room per sandbox uid, removed when its creator exits.

    Each concurrent slot's children chroot into their own room: two sandboxes that shared a root directory could
    signal each other through flock() on "/".
    """

    def __init__(self):
        sweep_stale()
        self.path = tempfile.mkdtemp(prefix=f"{JAIL_PREFIX}{os.getpid()}-{_pid_namespace()}-")
        os.chmod(self.path, 0o555)
        self.owner = os.getpid()
        atexit.register(self.close)

    def room(self, uid: int) -> str:
        """Return the empty room of one sandbox uid, made on first use (the jail itself if that fails)."""
        path = os.path.join(self.path, str(uid))
        if os.path.isdir(path):
            return path
        try:
            os.chmod(self.path, 0o755)  # root needs no write bit; an ordinary user does
            try:
                os.mkdir(path, 0o555)
            finally:
                os.chmod(self.path, 0o555)
        except FileExistsError:
            pass
        except OSError:
            return self.path
        return path

    def close(self):
        if os.getpid() == self.owner:
            _remove_jail(self.path)


def _remove_jail(path: str) -> bool:
    """Remove a jail and its empty rooms; touch nothing that is not a real directory of ours (never a link)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        os.chmod(path, 0o700)
        with os.scandir(path) as rooms:
            for room in rooms:
                if room.is_dir(follow_symlinks=False):
                    os.chmod(room.path, 0o700)
                    os.rmdir(room.path)  # only ever empty: rmdir refuses anything else
        os.rmdir(path)
        return True
    except OSError:
        return False


def sweep_stale() -> int:
    """Remove the empty jails of grader processes that were killed before they could; return how many.

    A jail's name carries its creator's pid and PID namespace, so a jail of a live grader, or of one in another
    container sharing this temporary folder, is never touched.
    """
    removed, ours = 0, _pid_namespace()
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{JAIL_PREFIX}*-*-*")):
        pid, ns, _ = os.path.basename(path)[len(JAIL_PREFIX) :].split("-", 2)
        if not pid.isdigit() or ns != ours or os.path.exists(f"/proc/{pid}"):
            continue
        removed += _remove_jail(path)
    return removed


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


_JAIL: Jail | None = None
_HELD = [0]


def jail() -> Jail:
    """Return this process's jail directory, creating it once."""
    global _JAIL
    if _JAIL is None or not os.path.isdir(_JAIL.path):
        _JAIL = Jail()
    return _JAIL


@contextlib.contextmanager
def held():
    """Keep the jail directory for the duration of a grading run, and remove it when the outermost run ends."""
    _HELD[0] += 1
    try:
        yield jail()
    finally:
        _HELD[0] -= 1
        if _HELD[0] == 0 and _JAIL is not None:
            _JAIL.close()


def is_root() -> bool:
    return hasattr(os, "getuid") and os.getuid() == 0


def set_name(name: str) -> None:
    """Name this process as `ps` and `top` show it (at most 15 bytes), so each of the grader's roles is told apart."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _unshare(flags: int) -> bool:
    return _LIBC is not None and _LIBC.unshare(flags) == 0


class PidNamespaceForker:
    """Fork a child that is PID 1 of a new PID namespace while staying this process's own child (root only).

    unshare(CLONE_NEWPID) moves only future children; setns back to our own namespace afterwards lets the next
    sandbox get a new one again. Without privileges this returns None and the caller falls back.
    """

    def __init__(self):
        self.own = None
        if _LIBC is not None and is_root():
            try:
                self.own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.own = None

    def fork(self) -> tuple[int, bool]:
        """Fork; return (pid, whether the child got its own PID namespace)."""
        if self.own is None or not _unshare(CLONE_NEWPID):
            return os.fork(), False
        try:
            pid = os.fork()
        finally:
            if os.getpid() != 1:  # the parent, and any child that is not in the new namespace
                _LIBC.setns(self.own, CLONE_NEWPID)
        return pid, True


_FORKER: dict[int, PidNamespaceForker] = {}


def fork_child() -> tuple[int, bool]:
    """Fork a sandbox child, in its own PID namespace where this process may make one; return (pid, pid_ns).

    As root the child is our own child and PID 1 of its namespace. Otherwise a helper process enters a new user
    and PID namespace and forks the child inside them; the helper waits for the child and dies the way it died,
    so the pid returned is the helper's, and killing it takes the child along (parent-death signal).
    """
    if _LIBC is None:
        return os.fork(), False
    if is_root():
        forker = _FORKER.get(os.getpid())
        if forker is None:  # one per process: each holds a descriptor of this process's own PID namespace
            forker = _FORKER[os.getpid()] = PidNamespaceForker()
        if forker.own is not None:
            return forker.fork()
    return _fork_through_helper()


def _fork_through_helper() -> tuple[int, bool]:
    r, w = os.pipe()
    helper = os.fork()
    if helper:
        os.close(w)
        ok = os.read(r, 1) == b"1"
        os.close(r)
        return helper, ok
    os.close(r)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    uid, gid = os.getuid(), os.getgid()
    ok = _unshare(CLONE_NEWUSER | CLONE_NEWPID)
    if ok:
        _write_proc("/proc/self/setgroups", "deny")
        ok = _write_proc("/proc/self/uid_map", f"{uid} {uid} 1") and _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
    child = os.fork()
    if child == 0:
        os.close(w)
        return 0, ok
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.write(w, b"1" if ok else b"0")
    os.close(w)
    for fd in range(3, 1024):  # hold nothing of the child's: its pipes must close when it dies
        try:
            os.close(fd)
        except OSError:
            pass
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)


def _write_proc(path: str, text: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError:
        return False


def enter(jail_path: str, uid: int, limits, pid_ns: bool) -> Protections:
    """Put the calling child behind every wall this machine allows; return which it got."""
    root = is_root()
    user_ns = False
    if root:
        ipc = net = _unshare(CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS)
    else:  # inside the user namespace the helper made (fork_child), where that worked
        user_ns = pid_ns
        ipc = net = user_ns and _unshare(CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS)
    ipc_limits = ipc and all(_write_proc(f"/proc/sys/kernel/{name}", "0") for name in IPC_LIMITS)
    rlimits = set_limits(limits)
    chroot = False
    try:
        os.chroot(jail_path)
        os.chdir("/")
        chroot = True
    except OSError:
        pass
    own_uid = False
    if root:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            own_uid = os.getuid() == uid and os.geteuid() == uid
        except OSError:
            pass
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    except (ValueError, OSError):
        pass
    try:  # a handful of descriptors is all a child needs: no thousands of pipes or sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_FILES, MAX_FILES))
    except (ValueError, OSError):
        rlimits = False
    filtered = False
    if _LIBC is not None:  # after the uid switch, which clears the parent-death signal
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _LIBC.prctl(PR_SET_DUMPABLE, 0)
        _LIBC.clearenv()
        filtered = install_seccomp()
    os.environ.clear()  # clearenv() emptied the C environment; this is Python's copy
    return Protections(pid_ns, ipc, ipc_limits, net, user_ns, chroot, own_uid, rlimits, filtered, "fork")


# System calls a sandbox never needs and that reach past its other walls: kernel keyrings (per uid, in no
# namespace: answers would outlive the sandbox), memfd (memory no rlimit counts), another process's memory,
# io_uring (which bypasses this filter), and namespace or mount changes.
BLOCKED_SYSCALLS = {
    "x86_64": (
        248,
        249,
        250,
        319,
        447,
        101,
        310,
        311,
        312,
        438,
        298,
        321,
        323,
        425,
        426,
        427,
        165,
        166,
        155,
        272,
        308,
        304,
    ),
    "aarch64": (
        217,
        218,
        219,
        279,
        447,
        117,
        270,
        271,
        272,
        438,
        241,
        280,
        282,
        425,
        426,
        427,
        40,
        39,
        41,
        97,
        268,
        265,
    ),
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
MAX_FILES = 64


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_FILTER: list = []  # the compiled program and its instructions, built once in the parent, shared by every child


def seccomp_program():
    """Return the BPF program that fails BLOCKED_SYSCALLS with EPERM (and every foreign-ABI call), or None."""
    machine = os.uname().machine
    if machine not in BLOCKED_SYSCALLS or _LIBC is None:
        return None
    if not _FILTER:
        ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
        allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
        blocked = BLOCKED_SYSCALLS[machine]
        # load arch; foreign ABI: deny; load nr; x32 numbers: deny; each blocked nr: deny; else allow.
        # A jump's offset counts from the next instruction; "deny" is the last instruction.
        prog = [(ld, 0, 0, 4), (jeq, 1, 0, AUDIT_ARCH[machine]), (ret, 0, 0, deny), (ld, 0, 0, 0)]
        prog.append((jge, len(blocked) + 1, 0, 0x40000000))
        for k, nr in enumerate(blocked):
            prog.append((jeq, len(blocked) - k, 0, nr))
        prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
        filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
        _FILTER.extend([_SockFprog(len(prog), filters), filters])
    return _FILTER[0]


def install_seccomp() -> bool:
    """Install the seccomp filter of seccomp_program(); True if it took."""
    fprog = seccomp_program()
    return fprog is not None and _LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def set_limits(limits) -> bool:
    """Take rlimits: address space above the current size, CPU, output size, no core files."""
    try:
        with open("/proc/self/statm") as f:
            vm_bytes = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        vm_bytes = 0
    ok = True
    for which, value in (
        ("RLIMIT_AS", vm_bytes + limits.memory_mb * 2**20 if vm_bytes else None),
        ("RLIMIT_CPU", limits.cpu_seconds),
        ("RLIMIT_FSIZE", limits.output_bytes),
        ("RLIMIT_CORE", 0),
        ("RLIMIT_MEMLOCK", 0),
        ("RLIMIT_MSGQUEUE", 0),
    ):
        if value is None or not hasattr(resource, which):
            ok = ok and which not in ("RLIMIT_AS", "RLIMIT_CPU")
            continue
        hard = value + 5 if which == "RLIMIT_CPU" else value
        try:
            resource.setrlimit(getattr(resource, which), (value, hard))
        except (ValueError, OSError):
            ok = ok and which not in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE")
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long print raises instead of killing
    return ok
