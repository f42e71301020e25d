"""Grade many submissions at once: one forked grading process per student, at most `jobs` alive at a time.

The scheduling process holds the truth but never a student's code or replies, so every grading process starts
from memory no other student has touched, and each sandbox it forks inherits only its own student's data. A
grading process that dies (the OOM killer, a stray kill) is retried once, then recorded as an error; one that
overruns its deadline is killed and recorded. The run always ends, with a result for every task.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from grader.sandbox import costs, jail, set_slot

MAX_RESULT_BYTES = 64 << 20


@dataclass
class _Running:
    task: object
    pid: int
    fd: int
    slot: int
    started: float
    tries: int
    chunks: list = field(default_factory=list)


def run(
    tasks: list,
    grade_one: Callable[[object], dict],
    *,
    jobs: int,
    deadline: float,
    retries: int = 1,
    after_first: Callable[[], object] | None = None,
) -> Iterator[tuple[object, dict | None, str]]:
    """Yield (task, result, why) for every task; result is None when its grading process failed, and why says how.

    after_first() runs once, right after the first grading process starts: work of this process that only later
    grading processes need (collapsing the heap) overlaps the first student's grading.
    """
    queue = [(t, 0) for t in tasks]
    queue.reverse()
    running: dict[int, _Running] = {}
    free_slots = list(range(max(1, jobs)))[::-1]
    try:
        while queue or running:
            while queue and free_slots:
                task, tries = queue.pop()
                slot = free_slots.pop()
                job = start_job(task, grade_one, slot, tries)
                running[job.fd] = job
                if after_first is not None:
                    after_first, first = None, after_first
                    first()
            ready, _, _ = select.select(list(running), [], [], _next_wakeup(running, deadline))
            for fd in ready:
                job = running[fd]
                chunk = os.read(fd, 1 << 20)
                if chunk and sum(map(len, job.chunks)) < MAX_RESULT_BYTES:
                    job.chunks.append(chunk)
                    continue
                del running[fd]
                free_slots.append(job.slot)
                result, why = _finish(job)
                if result is None and job.tries < retries:
                    queue.append((job.task, job.tries + 1))
                    continue
                yield job.task, result, why
            now = time.monotonic()
            for fd, job in list(running.items()):
                if now - job.started > deadline:
                    _kill(job)
                    del running[fd]
                    free_slots.append(job.slot)
                    yield job.task, None, f"grading took longer than {deadline:g} s and was stopped"
    finally:
        for job in running.values():
            _kill(job)


def in_child(fn: Callable[[], object], deadline: float = 3600) -> object:
    """Return fn() computed in a throwaway child, so that what it reads never enters this process's memory."""
    results = list(run([None], lambda _: {"value": fn()}, jobs=1, deadline=deadline, retries=0))
    ((_, result, why),) = results
    if result is None:
        raise RuntimeError(f"a helper process failed: {why}")
    return result["value"]


class Background:
    """fn() computed in a forked child while this process goes on; result() waits for it and returns it.

    For work that reads what the scheduling process must not (students' files, for the similarity check) and
    needs no sandbox: it runs no student code. Its result comes back as JSON, like a grading process's.
    """

    def __init__(self, fn: Callable[[], object]):
        self.job = start_job(None, lambda _: {"value": fn()}, 0, 0, slot_uid=False)
        self.done = False

    def result(self, timeout: float = 900.0) -> object:
        """Wait for the child (at most timeout seconds from now); return fn()'s value, or raise RuntimeError."""
        chunks, size, deadline = [], 0, time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.job.fd], [], [], left)[0]:
                self.kill()
                raise RuntimeError(f"a helper process took longer than {timeout:g} s and was stopped")
            chunk = os.read(self.job.fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                self.kill()
                raise RuntimeError("a helper process sent too much")
            chunks.append(chunk)
        self.job.chunks, self.done = chunks, True
        result, why = _finish(self.job)
        if result is None:
            raise RuntimeError(f"a helper process failed: {why}")
        return result["value"]

    def kill(self):
        """Stop the child if it is still running."""
        if not self.done:
            self.done = True
            _kill(self.job)


def _next_wakeup(running: dict, deadline: float) -> float:
    if not running:
        return 0.0
    oldest = min(job.started for job in running.values())
    return max(0.01, min(1.0, oldest + deadline - time.monotonic()))


def start_job(task, grade_one, slot: int, tries: int, slot_uid: bool = True) -> _Running:
    r, w = os.pipe()
    gc.freeze()  # nobody collects the inherited heap: a full collection walks all of torch and copies its pages
    # Ctrl-C held back during fork: arriving in os.fork's at-fork callbacks (logging's), it would be swallowed
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending Ctrl-C is raised here, in the scheduler
    if pid == 0:  # the grading process: never returns
        code = 0
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(r)
            if jail._LIBC is not None:
                jail._LIBC.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL)
            jail.set_name("grade-student" if slot_uid else "grade-helper")
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if slot_uid:
                set_slot(slot)
            data = json.dumps(grade_one(task)).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(w, view) :]
            costs.note("grading" if slot_uid else "background")
        except BaseException as exc:  # noqa: B036 - a grader bug: reported as this student's error, never raised here
            code = 70
            try:  # say what went wrong, for the instructor's report (the scheduler reads it with the exit code)
                os.write(w, json.dumps({"grader_error": f"{type(exc).__name__}: {exc}"[:500]}).encode())
            except BaseException:  # noqa: B036, S110 - the exit code alone still says it failed
                pass
        finally:
            os._exit(code)
    os.close(w)
    return _Running(task, pid, r, slot, time.monotonic(), tries)


def _finish(job: _Running) -> tuple[dict | None, str]:
    os.close(job.fd)
    _, status = os.waitpid(job.pid, 0)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name if os.WTERMSIG(status) in signal.valid_signals() else "?"
        return None, f"its grading process was killed by {name}"
    if os.WEXITSTATUS(status) != 0:
        why = f"its grading process failed (exit code {os.WEXITSTATUS(status)})"
        try:
            said = json.loads(b"".join(job.chunks)[-2000:])
        except ValueError:
            said = None
        if isinstance(said, dict) and isinstance(said.get("grader_error"), str):
            why += f": {said['grader_error'][:300]}"
        return None, why
    try:
        result = json.loads(b"".join(job.chunks))
    except ValueError:
        return None, "its grading process sent an unreadable result"
    if not isinstance(result, dict):
        return None, "its grading process sent an unreadable result"
    return result, ""


def _kill(job: _Running):
    try:
        os.kill(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.close(job.fd)
    except OSError:
        pass
    os.waitpid(job.pid, 0)
