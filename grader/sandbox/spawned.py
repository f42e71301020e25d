"""The spawn backend's child: `python -m grader.sandbox.spawned MEMORY_MB CPU_SECONDS [MODULE ...]`, on stdin/stdout.

MODULE: a module whose import registers a request handler (grader/sandbox/forget.py), as the parent has them.

Used where fork and namespaces are not to be had (macOS, Windows) or when GRADER_SANDBOX=spawn. A fresh
interpreter has no answers in memory; it takes rlimits where the platform has them, keeps the real stdout for
replies and sends the student's prints to the output file.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> None:
    """Serve requests on stdin/stdout until stdin closes."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # the student's print() goes to the output file, never into the reply stream
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    memory_mb, cpu_seconds = int(argv[0]), int(argv[1])
    import importlib

    for name in argv[2:]:
        if name.startswith("grader."):  # the parent's own registered handlers, never anything else
            importlib.import_module(name)
    from grader.sandbox import child, jail
    from grader.sandbox.worker import Limits

    child.import_allowed()  # before the rlimits, and before the environment (OPENBLAS_NUM_THREADS, say) is emptied

    limits = Limits(memory_mb=memory_mb, cpu_seconds=cpu_seconds)
    rlimits = jail.set_limits(limits) if os.name == "posix" else False
    for key in [k for k in os.environ if k not in ("PATH", "SYSTEMROOT")]:
        del os.environ[key]
    child.warm_up()
    child.arm()
    protections = jail.Protections(rlimits=rlimits, backend="spawn")
    child.ChildServer(sys.stdin.fileno(), reply_fd, protections).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
