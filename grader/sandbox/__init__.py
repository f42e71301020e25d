"""Run student code in isolated child processes; the grader only ever sees plain tensors from them.

- worker.py: the parent's side (start a child, send a request, read a bounded reply, kill on deadline);
- child.py: the child's side (scrub answers, import allow-list, autograd tripwires, the request loop);
- jail.py: the walls (namespaces, empty root, own uid, rlimits, no environment) and which ones a machine gives;
- spawned.py: the fallback child for platforms without fork and namespaces;
- internals.py: the parent's static flag for reaching into interpreter or torch internals.
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
