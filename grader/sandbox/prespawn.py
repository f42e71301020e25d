"""A spawn-backend sandbox started before the grader imports torch, so that both import it at once.

On a laptop (macOS, Windows, or GRADER_SANDBOX=spawn) the sandbox is a fresh interpreter that must import torch
itself. `grade exN` starts it first thing, before its own `import torch`, and the Worker that needs it takes it
over; it holds nothing until then (it reads its requests from stdin). Nothing here imports torch.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile

MEMORY_MB = 2048  # address space a child may add on top of what it starts with (worker.Limits' default)
CPU_SECONDS = 600  # CPU seconds over a child's whole life (worker.Limits' default)
_STARTED: list = []  # (process, its output file, the (memory, cpu, modules) it was started with)


def backend() -> str:
    """Return the sandbox backend: fork on Linux, spawn elsewhere or when GRADER_SANDBOX=spawn."""
    chosen = os.environ.get("GRADER_SANDBOX", "").strip().lower()
    if chosen in ("fork", "spawn"):
        return chosen if (chosen == "spawn" or sys.platform == "linux") else "spawn"
    return "fork" if sys.platform == "linux" else "spawn"


def popen(memory_mb: int, cpu_seconds: int, modules, out) -> subprocess.Popen:
    """Start a spawn-backend sandbox: a fresh interpreter speaking on stdin and stdout, its prints into out."""
    env = {k: os.environ[k] for k in ("PATH", "SYSTEMROOT", "TEMP", "TMP") if k in os.environ}
    return subprocess.Popen(
        [sys.executable, "-m", "grader.sandbox.spawned", str(memory_mb), str(cpu_seconds), *modules],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=out,
        env=env,
        cwd=tempfile.gettempdir(),
        start_new_session=sys.platform != "win32",
    )


def start(memory_mb: int = MEMORY_MB, cpu_seconds: int = CPU_SECONDS, modules=()) -> bool:
    """Start one sandbox ahead of need, where the backend is spawn; True if one was started."""
    if backend() != "spawn" or _STARTED:
        return False
    out = tempfile.TemporaryFile()
    _STARTED.append((popen(memory_mb, cpu_seconds, modules, out), out, (memory_mb, cpu_seconds, tuple(modules))))
    return True


def take(memory_mb: int, cpu_seconds: int, modules=()):
    """Return (process, output file) of the sandbox started ahead, if it fits these limits; else None."""
    if not _STARTED:
        return None
    proc, out, key = _STARTED.pop()
    if key == (memory_mb, cpu_seconds, tuple(modules)) and proc.poll() is None:
        return proc, out
    _stop(proc, out)
    return None


def _stop(proc, out) -> None:
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for stream in (proc.stdin, proc.stdout, out):
        try:
            stream.close()
        except OSError:
            pass


@atexit.register
def _unused() -> None:
    """Stop a sandbox started ahead that nothing took (a command that failed before grading)."""
    while _STARTED:
        proc, out, _ = _STARTED.pop()
        _stop(proc, out)
