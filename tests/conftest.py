"""Shared fixtures: paths, a submission builder and one grading of the reference."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from grader.sandbox.jail import JAIL_PREFIX

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference"
EXERCISES = ROOT / "exercises"
CORPUS = Path(__file__).resolve().parent / "corpus"
NAMES_TXT = ROOT.parent / "shared" / "data" / "names.txt"

# Every `grade` a test runs grades in its own process, as before there was a warm process to hand runs to, and
# starts none to outlive the test; tests/test_warm.py turns it on with a folder of its own.
os.environ["GRADER_WARM"] = "0"


def make_submission(tmp: Path, files: dict[str, str] | None = None, base: Path | None = REFERENCE) -> Path:
    """Write a throwaway submission: the base folder's files, with some files replaced or appended to."""
    tmp.mkdir(parents=True, exist_ok=True)
    if base is not None:
        for f in base.glob("ex*.py"):
            shutil.copy(f, tmp / f.name)
    for name, text in (files or {}).items():
        (tmp / name).write_text(text)
    return tmp


def with_snippet(tmp: Path, exercise: str, snippet: str) -> Path:
    """Write the reference with a snippet appended to one exercise file (later defs win)."""
    text = (REFERENCE / f"{exercise}.py").read_text() + "\n\n" + snippet
    return make_submission(tmp, {f"{exercise}.py": text})


def _forks_of_this_process() -> list[int]:
    """Return children of this process that are forks of it (grading processes, sandboxes), zombies included."""
    me, found = os.getpid(), []
    try:
        cmdline = Path(f"/proc/{me}/cmdline").read_bytes()
    except OSError:
        return []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and (entry / "cmdline").read_bytes() in (cmdline, b""):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return "; ".join(line for line in status if line.split(":")[0] in ("Name", "State", "Uid", "NSpid"))
    except OSError:
        return "gone"


def _sysv() -> list[str]:
    """Return the SysV shared memory segments, semaphore sets and message queues that exist."""
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            found += [f"{kind}: {line}" for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]]
        except OSError:
            pass
    return found


def _posix_ipc() -> set[str]:
    """Return the POSIX shared memory and message queues that exist (a sandbox could leave one behind)."""
    found = set()
    for folder in ("/dev/shm", "/dev/mqueue"):
        try:
            # skip the browser's own (tests/test_report.py's Chromium, perhaps in another xdist worker right now)
            found |= {f"{folder}/{name}" for name in os.listdir(folder) if not name.startswith(".org.chromium.")}
        except OSError:
            pass
    return found


def _locks_of(pids: set[int]) -> list[str]:
    """Return the file locks held by any of these processes (/proc/locks)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [ln for ln in lines if len(ln.split()) > 4 and ln.split()[4].isdigit() and int(ln.split()[4]) in pids]


def _jails() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob(f"{JAIL_PREFIX}{os.getpid()}-*"))


@pytest.fixture(autouse=True)
def leaves_nothing_behind():
    """Check after every test: no process, jail, SysV or POSIX IPC object, or lock of the grader's is left."""
    shm, jails, posix = _sysv(), _jails(), _posix_ipc()
    yield
    deadline = time.monotonic() + 5
    while _forks_of_this_process() and time.monotonic() < deadline:
        time.sleep(0.02)
    left = {p: _describe(p) for p in _forks_of_this_process()}
    assert not left, f"a grading process or sandbox outlived the test: {left}"
    assert _jails() <= jails, "a jail folder was left behind"
    assert _sysv() == shm, "a SysV shared memory segment, semaphore set or message queue was left behind"
    assert _posix_ipc() <= posix, f"a POSIX shared memory object or queue was left behind: {_posix_ipc() - posix}"
    assert _locks_of({os.getpid()}) == [], "a file lock of the grader's was left behind"


@pytest.fixture(scope="session")
def reference_result():
    from grader.grading.runner import grade

    return grade(REFERENCE)


def item_json(exercise, name, status="passed", score=None, max_score=1.0, **extra):
    """Return one hand-made item in the runner's JSON shape."""
    item = {
        "id": f"{exercise}.{name}",
        "exercise": exercise,
        "name": name,
        "status": status,
        "exact": status == "passed",
        "approx": status == "passed",
        "maxdiff": 0.0 if status == "passed" else 0.25,
        "shape": [32, 27],
        "expected_shape": [32, 27],
        "traps": [],
        "message": "",
        "score": max_score if score is None and status == "passed" else (score or 0.0),
        "max_score": max_score,
    }
    item.update(extra)
    return item


@pytest.fixture
def no_truth_built():
    """Start a test from no fixture built in this process (fixture.BUILT), and put the cache back after it."""
    from grader.truth import fixture

    with fixture.BUILT.emptied():
        yield


def sandboxes_started(monkeypatch) -> list[bool]:
    """Record, for each sandbox started in this process from now on, whether a zygote forked it; the first entry
    says whether a zygote was there already when the submission was read."""
    from grader.sandbox import worker, zygote
    from grader.submissions import intake

    started, real, read = [], worker.Worker.start_fork, intake.read_submission

    def start_fork(self):
        started.append(zygote.current() is not None)
        return real(self)

    def read_submission(*args, **kwargs):
        started.append(zygote.current() is not None)
        return read(*args, **kwargs)

    monkeypatch.setattr(worker.Worker, "start_fork", start_fork)
    monkeypatch.setattr(intake, "read_submission", read_submission)
    return started


# Under pytest-xdist (two workers, `--dist=loadfile`: pyproject's addopts) each file goes to one worker whole, so
# a file's module fixtures are built once; the files that take longest are handed out first, so no core waits at the
# end.
LONGEST_FIRST = (
    "test_warm.py",
    "test_modes.py",
    "test_modes_gradescope.py",
    "test_release.py",
    "test_isolation.py",
    "test_cli.py",
    "test_colab.py",
    "test_golden.py",
    "test_honest.py",
    "test_batch.py",
    "test_gradescope.py",
)


def pytest_collection_modifyitems(items):
    """Put the files that take longest first (a stable sort: each file keeps its own order)."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
