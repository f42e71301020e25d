"""Grade many submissions at once, at most `jobs` at a time: run_graders() or run().

The scheduling process holds the truth but never a student's code or replies. run_graders() forks one long-lived
grading process per slot, which grades student after student, and a zygote beside it that forks its sandboxes
from memory no student has touched. run() forks one grading process per student, which forks its sandbox itself
(where no zygote can be had). Either way a grading process that dies (the OOM killer, a stray kill) is retried
once, then recorded as an error; one that overruns its deadline is killed and recorded. The run always ends,
with a result for every task.
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

from grader.sandbox import costs, jail, zygote

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


@dataclass
class _Grader:
    """A long-lived grading process of one slot, with the zygote that forks its sandboxes."""

    pid: int
    zygote: int
    tasks_w: int  # task numbers go this way
    fd: int  # results come back this way: an 8-byte length, then JSON
    slot: int
    current: tuple | None = None  # (task, tries, started) of the student it grades now
    buffer: bytearray = field(default_factory=bytearray)


_STOP = (1 << 64) - 1  # the task number that tells a grading process to end
GRADER_STUDENTS = 400  # students one grading process grades before a fresh one takes its slot (memory stays flat)


def run_graders(
    tasks: list,
    grade_one: Callable[[object], dict],
    *,
    jobs: int,
    deadline: float,
    retries: int = 1,
    between: Callable[[], Callable[[], None]] | None = None,
) -> Iterator[tuple[object, dict | None, str]]:
    """Like run(), with one long-lived grading process per slot instead of one per student.

    Each grading process grades student after student; since it then holds earlier students' code and replies,
    its sandboxes are forked by a zygote of its slot (grader.sandbox.zygote), forked from this process before
    the grading process. between() runs in each grading process as it starts and returns what puts its state
    back before every student after the first. A grading process that dies or overruns is replaced, with a new
    zygote, and its student treated as in run().
    """
    queue = [(number, 0) for number in reversed(range(len(tasks)))]  # (task number, tries)
    graders: dict[int, _Grader] = {}  # by result descriptor
    idle: list[_Grader] = []
    free_slots = list(range(max(1, min(jobs, len(tasks)))))[::-1]
    try:
        while queue or any(g.current for g in graders.values()):
            while free_slots and len(queue) > len(idle):  # work that no grading process is free for
                grader = _start_grader(tasks, grade_one, free_slots.pop(), list(graders.values()), between)
                graders[grader.fd] = grader
                idle.append(grader)
            while queue and idle:
                grader = idle.pop()
                number, tries = queue.pop()
                grader.current = (number, tries, time.monotonic())
                _send_task(grader, number)
            oldest = min((g.current[2] for g in graders.values() if g.current), default=time.monotonic())
            wait = max(0.01, min(1.0, oldest + deadline - time.monotonic()))
            ready, _, _ = select.select(list(graders), [], [], wait)
            for fd in ready:
                grader = graders[fd]
                chunk = os.read(fd, 1 << 20)
                if grader.current is None:  # an idle one ended (it grades GRADER_STUDENTS at most): a new one
                    _stop_grader(graders.pop(fd), kill=True)
                    idle.remove(grader)
                    free_slots.append(grader.slot)
                    continue
                if chunk and len(grader.buffer) + len(chunk) <= MAX_RESULT_BYTES + 9:
                    grader.buffer += chunk
                    got = _frame(grader)
                    if got is None:
                        continue
                    number, tries, _ = grader.current
                    grader.current = None
                    result, why = _decode(got[0])
                    if result is not None and "grader_error" in result:  # a grader bug: this process then ends
                        result, why = None, _said(result)
                    if got[1] or result is None:  # it ends (or cannot be trusted on): a new one takes the slot
                        _stop_grader(graders.pop(fd), kill=result is None)
                        free_slots.append(grader.slot)
                    else:
                        idle.append(grader)
                    if result is None and tries < retries:
                        queue.append((number, tries + 1))
                        continue
                    yield tasks[number], result, why
                    continue
                number, tries, _ = grader.current  # it died (or sent too much) mid-student
                grader.current = None
                why = _stop_grader(graders.pop(fd), kill=True)
                free_slots.append(grader.slot)
                if tries < retries:
                    queue.append((number, tries + 1))
                    continue
                yield tasks[number], None, why
            now = time.monotonic()
            for fd, grader in list(graders.items()):
                if grader.current and now - grader.current[2] > deadline:
                    number = grader.current[0]
                    _stop_grader(graders.pop(fd), kill=True)
                    free_slots.append(grader.slot)
                    yield tasks[number], None, f"grading took longer than {deadline:g} s and was stopped"
    finally:
        for grader in graders.values():
            _stop_grader(grader, kill=grader.current is not None)


def _start_grader(tasks, grade_one, slot: int, others: list[_Grader], between) -> _Grader:
    """Fork a slot's zygote, then its grading process; return the grading process."""
    theirs = [fd for g in others for fd in (g.tasks_w, g.fd)]
    gc.freeze()  # nobody collects the inherited heap: a full collection walks all of torch and copies its pages
    zygote_pid, sock = zygote.start(close_in_zygote=theirs)
    tasks_r, tasks_w = os.pipe()
    r, w = os.pipe()
    pid = _fork("grade-student")
    if pid:
        for fd in (tasks_r, w):
            os.close(fd)
        sock.close()
        return _Grader(pid, zygote_pid, tasks_w, r, slot)
    code = 0  # the grading process: never returns
    try:
        for fd in (tasks_w, r, *theirs):
            os.close(fd)
        from grader.sandbox import set_slot  # here: pool itself imports no torch (batch.py starts a Background first)

        set_slot(slot)
        zygote.use(zygote.Client(sock, zygote_pid))
        reset = between() if between is not None else None
        first, graded = True, 0
        while True:
            number = int.from_bytes(_read_exactly(tasks_r, 8), "little")
            if number == _STOP:
                break
            if not first and reset is not None:
                reset()
            first = False
            try:
                data = json.dumps(grade_one(tasks[number])).encode()
            except BaseException as exc:  # noqa: B036 - a grader bug: this student's error; this process then ends
                data = json.dumps({"grader_error": f"{type(exc).__name__}: {exc}"[:500]}).encode()
                code = 70
            graded += 1
            ending = bool(code) or graded >= GRADER_STUDENTS or not zygote.current().alive()
            _write_all(w, len(data).to_bytes(8, "little") + bytes([ending]) + data)
            if ending:
                break
        costs.note("grading")
    except BaseException:  # noqa: B036 - the scheduler sees the end of the pipe and the exit code
        code = code or 70
    finally:
        os._exit(code)


def _send_task(grader: _Grader, number: int) -> None:
    try:
        _write_all(grader.tasks_w, number.to_bytes(8, "little"))
    except OSError:  # it died: its result pipe ends, and the scheduler sees that
        pass


def _frame(grader: _Grader) -> tuple[bytes, bool] | None:
    """Return a whole result frame and whether its grading process ends after it, if the buffer holds one."""
    if len(grader.buffer) < 9:
        return None
    size = int.from_bytes(grader.buffer[:8], "little")
    if len(grader.buffer) < 9 + size:
        return None
    frame, ending = bytes(grader.buffer[9 : 9 + size]), grader.buffer[8] != 0
    del grader.buffer[: 9 + size]
    return frame, ending


def _decode(frame: bytes) -> tuple[dict | None, str]:
    try:
        result = json.loads(frame)
    except ValueError:
        return None, "its grading process sent an unreadable result"
    if not isinstance(result, dict):
        return None, "its grading process sent an unreadable result"
    return result, ""


def _said(result) -> str:
    why = "its grading process failed (exit code 70)"
    if isinstance(result, dict) and isinstance(result.get("grader_error"), str):
        why += f": {result['grader_error'][:300]}"
    return why


def _stop_grader(grader: _Grader, kill: bool) -> str:
    """End a grading process and its zygote (killed, or asked to stop); return how the grading process ended."""
    if kill:
        try:
            os.kill(grader.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        _send_task(grader, _STOP)
    for fd in (grader.tasks_w, grader.fd):
        try:
            os.close(fd)
        except OSError:
            pass
    _, status = os.waitpid(grader.pid, 0)
    if kill:
        try:
            os.kill(grader.zygote, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.waitpid(grader.zygote, 0)  # it ends once its grading process let go of it
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"its grading process was killed by {signal.Signals(sig).name if sig in signal.valid_signals() else '?'}"
    return f"its grading process failed (exit code {os.WEXITSTATUS(status)})"


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return _STOP.to_bytes(8, "little")  # the scheduler is gone: stop
        data += chunk
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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


def _fork(name: str) -> int:
    """Fork a child of this scheduler that dies with it and with Ctrl-C, named name; return fork's answer.

    Ctrl-C is held back during fork (jail.fork). Released afterwards, a pending one is raised in the scheduler,
    and ends the child by its default action.
    """

    def in_child():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if jail._LIBC is not None:
            jail._LIBC.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL)
        jail.set_name(name)

    return jail.fork(in_child)


def start_job(task, grade_one, slot: int, tries: int, slot_uid: bool = True) -> _Running:
    r, w = os.pipe()
    gc.freeze()  # nobody collects the inherited heap: a full collection walks all of torch and copies its pages
    pid = _fork("grade-student" if slot_uid else "grade-helper")
    if pid == 0:  # the grading process: never returns
        code = 0
        try:
            os.close(r)
            if slot_uid:
                from grader.sandbox import set_slot

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
