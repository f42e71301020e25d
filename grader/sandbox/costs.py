"""What each of the grader's processes cost, for bench/: CPU and page faults by role, written where asked.

Only when the environment names a file (GRADER_COST_LOG): each process appends one JSON line as it ends, with
its own usage (children not counted), and a process that reaps sandbox children adds theirs under "sandboxes".
Nothing is written otherwise, and nothing here changes what the grader does.
"""

from __future__ import annotations

import json
import os
import resource

ENV = "GRADER_COST_LOG"
_REAPED = [0.0, 0.0, 0]  # user s, system s, minor faults of the sandbox children this process reaped


def reaped(usage) -> None:
    """Count the rusage of one reaped sandbox child (from os.wait4)."""
    _REAPED[0] += usage.ru_utime
    _REAPED[1] += usage.ru_stime
    _REAPED[2] += usage.ru_minflt


def note(role: str) -> None:
    """Append this process's own usage under role, and its reaped sandboxes' (if any), to GRADER_COST_LOG."""
    path = os.environ.get(ENV)
    if not path:
        return
    me = resource.getrusage(resource.RUSAGE_SELF)
    lines = [{"role": role, "user": me.ru_utime, "system": me.ru_stime, "minflt": me.ru_minflt}]
    if _REAPED[0] or _REAPED[1]:
        lines.append({"role": "sandboxes", "user": _REAPED[0], "system": _REAPED[1], "minflt": _REAPED[2]})
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)  # one write of a few hundred bytes: appended whole
        finally:
            os.close(fd)
    except OSError:
        pass
