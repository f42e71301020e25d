"""The system calls a sandbox child may make: an allow-list built with libseccomp, the same in every setting.

Everything else fails with EPERM, so student code sees a plain PermissionError: no file is opened or stat'ed, no
socket, pipe or SysV/POSIX IPC object is made, no lock is taken, no process or thread is started, no namespace,
mount, chroot, uid or prctl change (the parent-death signal stays), and signals go to the child itself only.
What is left is what computing needs: memory, futexes, clocks, and reads and writes on the few descriptors the
child was handed. A call in a foreign ABI (i386's int 0x80, x32) kills the child.

libseccomp (through pyseccomp, which finds the library with ldconfig) is loaded here, in the parent, on import:
a child cannot run ldconfig once its walls are up.
"""

from __future__ import annotations

import errno

try:
    import pyseccomp as sc
except (ImportError, RuntimeError, OSError) as exc:  # no libseccomp on this machine, or not Linux
    sc = None
    _MISSING = f"libseccomp could not be loaded ({type(exc).__name__}: {exc})"
else:
    _MISSING = ""
    try:
        sc.get_api()  # probed once here: a child would otherwise probe the kernel again before every load
    except OSError:
        pass

MAX_FD = 63  # RLIMIT_NOFILE is 64: every descriptor a child holds is below this
MAP_ANONYMOUS = 0x20
F_GETFD, F_SETFD, F_GETFL = 1, 2, 3

# no arguments checked: they touch only the calling process
PLAIN = (
    "brk",
    "mmap",  # anonymous only (below); listed here for the name check
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "futex",
    "sched_yield",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "getpid",
    "gettid",
    "exit",
    "exit_group",
    "restart_syscall",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "clock_nanosleep",
    "nanosleep",
    "getrandom",
    "getrusage",
    "times",
)
ON_OWN_FDS = ("read", "write", "readv", "writev", "close", "lseek")


def missing() -> str:
    """Return why the filter cannot be built on this machine, or '' when it can."""
    return _MISSING


def build(pid: int):
    """Return the allow-list for a child whose pid (as it sees itself) is `pid`, ready to load."""
    if sc is None:
        raise OSError(_MISSING)
    own_fd = sc.Arg(0, sc.LE, MAX_FD)  # unsigned: also refuses AT_FDCWD and fds with high bits set
    f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in PLAIN:
        if name != "mmap":
            f.add_rule(sc.ALLOW, name)
    f.add_rule(sc.ALLOW, "mmap", sc.Arg(3, sc.MASKED_EQ, MAP_ANONYMOUS, MAP_ANONYMOUS))
    for name in ON_OWN_FDS:
        f.add_rule(sc.ALLOW, name, own_fd)
    for cmd in (F_GETFD, F_SETFD, F_GETFL):  # never F_SETLK, F_OFD_*, F_DUPFD, F_SETOWN ...
        f.add_rule(sc.ALLOW, "fcntl", own_fd, sc.Arg(1, sc.EQ, cmd))
    f.add_rule(sc.ALLOW, "sched_getaffinity", sc.Arg(0, sc.EQ, 0))
    f.add_rule(sc.ALLOW, "prlimit64", sc.Arg(0, sc.EQ, 0), sc.Arg(2, sc.EQ, 0))  # read its own limits only
    f.add_rule(sc.ALLOW, "kill", sc.Arg(0, sc.EQ, pid))
    f.add_rule(sc.ALLOW, "tkill", sc.Arg(0, sc.EQ, pid))  # one thread: its tid is its pid
    f.add_rule(sc.ALLOW, "tgkill", sc.Arg(0, sc.EQ, pid), sc.Arg(1, sc.EQ, pid))
    return f


_BUILT: dict = {}  # pid: the allow-list built ahead (prebuild), for children that see themselves as that pid


def prebuild(pid: int) -> None:
    """Build, once in a zygote, the allow-list of every child it forks that sees itself as `pid` (PID 1 of its own
    namespace): each child then only loads it."""
    if sc is not None:
        _BUILT[pid] = build(pid)


def install(pid: int) -> bool:
    """Put the calling process under the allow-list for good; True if it took."""
    if sc is None:
        return False
    try:
        (_BUILT.get(pid) or build(pid)).load()  # sets no_new_privs itself
    except OSError:
        return False
    return True
