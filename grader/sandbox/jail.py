"""The walls around one sandbox child.

Two kinds, so that no guarantee depends on what a machine allows:
- the minimum, in every setting (root, a normal user, a container without CAP_SYS_ADMIN, PID 1): the system-call
  allow-list of syscalls.py (no file, socket, IPC, lock, process, namespace or prctl), every capability dropped,
  rlimits on address space, CPU seconds, output size, processes and descriptors, no environment, no_new_privs,
  and the parent-death signal, set after any uid switch;
- extras where the kernel gives them: its own PID, IPC and network namespaces, chroot into an empty room of its
  own, and its own uid per concurrent slot.
`Protections` says which a child got. A run that needs the minimum and lacks part of it is refused (see
`Protections.missing_minimum`), unless the instructor says --unsafe.
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

from grader.sandbox import syscalls

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_SET_NO_NEW_PRIVS = 1, 4, 15, 38
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
    caps: bool = False
    backend: str = "fork"

    MINIMUM = ("seccomp", "caps", "rlimits")  # the walls every guarantee rests on, in every setting
    WORDS = {
        "seccomp": "system-call allow-list (libseccomp): files, sockets, IPC, locks, processes",
        "caps": "every capability dropped",
        "rlimits": "memory, CPU and output limits",
        "pid_ns": "own PID namespace",
        "ipc_ns": "own IPC namespace",
        "ipc_limits": "SysV IPC limits at 0",
        "net_ns": "own network namespace",
        "chroot": "empty root directory",
        "own_uid": "own uid per sandbox",
    }

    def missing(self) -> list[str]:
        """Return every wall this machine does not give (minimum and extras), in words."""
        return [text for key, text in self.WORDS.items() if not getattr(self, key)]

    def missing_minimum(self) -> list[str]:
        """Return the minimum walls this machine does not give, in words: grading a class needs none missing."""
        return [self.WORDS[key] for key in self.MINIMUM if not getattr(self, key)]

    def missing_extras(self) -> list[str]:
        """Return the extra walls (namespaces, chroot, own uid) this machine does not give, in words."""
        return [text for key, text in self.WORDS.items() if key not in self.MINIMUM and not getattr(self, key)]

    def to_dict(self) -> dict:
        """Return the protections for summary.json."""
        return {
            "backend": self.backend,
            "missing": self.missing(),
            "missing_minimum": self.missing_minimum(),
        }


class WallsMissing(RuntimeError):
    """A run that must not start student code without the minimum walls: the message names the missing ones."""

    def __init__(self, missing: list[str]):
        self.missing = missing
        super().__init__(
            "refusing to run student code: this machine cannot put up the sandbox's minimum walls ("
            + "; ".join(missing)
            + "). Install libseccomp (Debian/Ubuntu: apt-get install libseccomp2) and grade on Linux, or pass "
            "--unsafe to grade without them."
        )


def sandbox_uid(slot: int) -> int:
    """Return the uid of a concurrent sandbox slot."""
    return SANDBOX_UID_BASE + slot


class Jail:
    """A private directory holding an empty room per sandbox child, removed when its creator exits.

    Each child chroots into a room of its own (an extra wall: the allow-list already refuses every path).
    """

    def __init__(self):
        sweep_stale()
        self.path = tempfile.mkdtemp(prefix=f"{JAIL_PREFIX}{os.getpid()}-{_pid_namespace()}-")  # 0o700
        self.owner = os.getpid()
        atexit.register(self.close)

    def room(self, uid: int) -> str:
        """Return a new empty room for one sandbox child (the jail itself if none can be made); see release_room."""
        try:
            path = tempfile.mkdtemp(prefix=f"{uid}-", dir=self.path)
            os.chmod(path, 0o555)
        except OSError:
            return self.path
        return path

    def release_room(self, path: str) -> None:
        """Remove a child's room once the child is gone (never the jail itself, never anything but an empty folder)."""
        if os.path.dirname(path) != self.path:
            return
        try:
            os.rmdir(path)
        except OSError:
            pass

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


UNWINDING = frozenset({signal.SIGINT, signal.SIGTERM})  # what `grade` unwinds on (KeyboardInterrupt, SystemExit)


def fork(in_child=None) -> int:
    """os.fork with INT and TERM held back until it returns; in_child() runs in the child before they are let in.

    A signal that arrives while fork runs its handlers (os.register_at_fork: logging's lock, ...) would raise in
    one of them, where the exception is printed and dropped: a TERM then was lost and the grader went on. Held,
    it is delivered just after, in the parent, where it unwinds as anywhere else.
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, UNWINDING)
    try:
        pid = os.fork()
        if pid == 0 and in_child is not None:
            in_child()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # in both processes
    return pid


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
            return fork(), False
        try:
            pid = fork()
        except BaseException:  # fork failed, or a held Ctrl-C or TERM arrived: the parent unwinds in its own namespace
            _LIBC.setns(self.own, CLONE_NEWPID)
            raise
        if pid:  # the parent (fork's answer, never getpid(): a grader may itself be PID 1 of a container)
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
        return fork(), False
    if is_root():
        forker = _FORKER.get(os.getpid())
        if forker is None:  # one per process: each holds a descriptor of this process's own PID namespace
            forker = _FORKER[os.getpid()] = PidNamespaceForker()
        if forker.own is not None:
            return forker.fork()
    return _fork_through_helper()


def _fork_through_helper() -> tuple[int, bool]:
    r, w = os.pipe()
    helper = fork()
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
    child = fork()
    if child == 0:
        os.close(w)
        return 0, ok
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    set_name("grade-userns")
    # a Ctrl-C reaches this helper too (it is in the grader's process group): raised here, it unwound the grader's
    # own code a second time ("Aborted!" twice, exit handlers run again); it ends with the grader or its child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.write(w, b"1" if ok else b"0")
    os.close(w)
    quiet_standard_streams()  # nor does it hold the grader's output, which a reader would wait on after it ends
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


def flush_standard_streams() -> None:
    """Flush sys.stdout and sys.stderr, whichever are there (None when the process started with fd 1 or 2 closed)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def quiet_standard_streams(fds=(0, 1, 2)) -> None:
    """Point these fds at /dev/null, for a process that reads and prints nothing (a reader of the grader's output
    would otherwise wait for it to end too); with no /dev/null (a bare chroot) they are kept."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in fds:
        os.dup2(devnull, fd)
    os.close(devnull)


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
    caps = filtered = False
    if _LIBC is not None:  # after the uid switch, which clears the parent-death signal
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1 and not pid_ns:  # the grader died before the signal was set: follow it now
            os._exit(70)
        _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _LIBC.prctl(PR_SET_DUMPABLE, 0)
        caps = drop_capabilities()
        _LIBC.clearenv()
        filtered = syscalls.install(os.getpid())  # last: from here on only the allow-list's calls work
    os.environ.clear()  # clearenv() emptied the C environment; this is Python's copy
    return Protections(pid_ns, ipc, ipc_limits, net, user_ns, chroot, own_uid, rlimits, filtered, caps, "fork")


MAX_FILES = 64
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> bool:
    """Drop every capability for good (bounding set, ambient, effective, permitted, inheritable); True if none is left.

    A normal user's child lives in a user namespace where it holds every capability: without this it could
    chroot into a folder and climb out, or mount. As root the uid switch already clears them; this makes sure.
    """
    if _LIBC is None:
        return False
    for cap in range(64):  # past the kernel's last capability the call fails: harmless
        _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        return False
    check = (_CapData * 2)()
    if _LIBC.capget(ctypes.byref(header), check) != 0:
        return False
    return all(c.effective == c.permitted == c.inheritable == 0 for c in check)


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
