"""Run student code in isolated child processes; the grader only ever sees plain tensors from them.

- worker.py: the parent's side (start a child, send a request, read a bounded reply, kill on deadline);
- child.py: the child's side (scrub answers, import allow-list, autograd tripwires, the request loop);
- jail.py: the walls (allow-list, capabilities, rlimits; namespaces, empty root, own uid where the kernel gives them);
- syscalls.py: the system-call allow-list, built with libseccomp;
- forget.py: what a forked child forgets and which extra requests it serves, registered from above;
- wire.py, arena.py, pages.py: the bounded parent-child format, memory every child drops, huge pages;
- spawned.py: the fallback child for platforms without fork and namespaces;
"""

from grader.sandbox.jail import Protections
from grader.sandbox.worker import (
    MALFORMED,
    Limits,
    Reply,
    Worker,
    backend,
    describe_status,
    protections,
    reap,
    saw_walls,
    set_slot,
)

__all__ = [
    "MALFORMED",
    "Limits",
    "Protections",
    "Reply",
    "Worker",
    "backend",
    "describe_status",
    "protections",
    "reap",
    "saw_walls",
    "set_slot",
]
