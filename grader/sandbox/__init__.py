"""Run student code in isolated child processes; the grader only ever sees plain tensors from them.

- worker.py: the parent's side (start a child, send a request, read a bounded reply, kill on deadline);
- child.py: the child's side (scrub answers, import allow-list, autograd tripwires, the request loop);
- jail.py: the walls (allow-list, capabilities, rlimits; namespaces, empty root, own uid where the kernel gives them);
- syscalls.py: the system-call allow-list, built with libseccomp;
- forget.py: what a forked child forgets and which extra requests it serves, registered from above;
- wire.py, arena.py, pages.py: the bounded parent-child format, memory every child drops, huge pages;
- spawned.py: the fallback child for platforms without fork and namespaces;
- standins.py, mainblock.py: what `import sys`/`types` give a file, and its `__main__` blocks, which never run;
"""

from grader.sandbox.lazy import exports

# Each public name and the module that holds it, imported on first use: `from grader.sandbox import prespawn`
# (grade exN, before anything imports torch) must not import torch through this package.
_WHERE = {
    "Protections": "jail",
    "MALFORMED": "worker",
    "Limits": "worker",
    "Reply": "worker",
    "Worker": "worker",
    "backend": "worker",
    "describe_status": "worker",
    "protections": "worker",
    "reap": "worker",
    "saw_walls": "worker",
    "set_slot": "worker",
}
__all__ = sorted(_WHERE)


__getattr__ = exports(__name__, _WHERE)
