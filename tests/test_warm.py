"""The warm process (grader/cli/warm.py): a run it serves is the run `grade` would have made in its own process.

Every test here has a socket folder of its own (TMPDIR) and stops its warm processes at the end; elsewhere in the
suite GRADER_WARM=0 (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.cli import ABORTED, warm
from tests.conftest import CORPUS, EXERCISES, REFERENCE, ROOT, make_submission, with_snippet
from tests.hostile_files import HOSTILE, touched, wrong_verdict
from tests.hostile_files import expectation as hostile_expectation
from tests.test_batch import _student

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the warm process is Linux's (fork backend)")

GRADE = [sys.executable, "-m", "grader"]
SLOW_EX1 = """

def dprobs(probs, dlogprobs):
    total = 0
    for i in range(60_000_000):
        total += i
    return dlogprobs / probs
"""


class Warm:
    """A socket folder of one test's own, and `grade` run with the warm process on (or off) in it."""

    def __init__(self, base: Path, **env: str):
        self.base = base
        self.env = {**os.environ, "GRADER_WARM": "1", "TMPDIR": str(base), **env}
        self.folder = base / f"grade-warm-{os.getuid()}"

    def grade(self, *args: str, warm_on: bool = True, **kw) -> subprocess.CompletedProcess:
        env = self.env if warm_on else {**self.env, "GRADER_WARM": "0"}
        return subprocess.run([*GRADE, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, **kw)

    def popen(self, *args: str, cwd: Path = ROOT, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [*GRADE, *args], env=self.env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
        )

    @contextlib.contextmanager
    def slow_run(self, tmp_path: Path):
        """Start a served run of a submission whose dprobs computes for seconds; yield (client, worker pid) once
        its worker grades (found by its working folder, a folder of this run's own). The client is always reaped."""
        slow = with_snippet(tmp_path / "slow", "ex1", SLOW_EX1)
        here = tmp_path / "here"
        here.mkdir()
        # a job of its own, as a shell runs it: a process group whose parent is in the session, so Ctrl-Z can stop it
        proc = self.popen("ex1", "--submission", str(slow), cwd=here, preexec_fn=os.setpgrp)
        try:
            deadline = time.monotonic() + 60
            worker = None
            while worker is None or "grade-sandbox" not in _graders(self.base).values():
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                worker = next((p for p, n in _graders(self.base).items() if n == "grade" and _cwd(p) == here), None)
                time.sleep(0.02)
            time.sleep(0.5)  # its sandbox in the submission's file
            yield proc, worker
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=60)

    def status(self) -> list[dict]:
        """Return the warm processes `grade warm` lists: [{pid, served, ours}]."""
        err = self.grade("warm").stderr
        pattern = r"warm process (\d+) for (this|another) environment.*?, (\d+) run\(s\) served"
        return [{"pid": int(p), "ours": w == "this", "served": int(s)} for p, w, s in re.findall(pattern, err)]

    def start(self, limit: float = 90.0) -> dict:
        """Grade once (cold: it starts a warm process as it ends); return the warm process once it serves."""
        first = self.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
        assert first.returncode == 0, first.stderr[-2000:]
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            ours = [w for w in self.status() if w["ours"]]
            if ours:
                return ours[0]
            time.sleep(0.3)
        raise AssertionError(f"no warm process after {limit} s: {sorted(os.listdir(self.folder))}")

    def served(self) -> int:
        return sum(w["served"] for w in self.status() if w["ours"])

    def stop(self) -> None:
        pids = [w["pid"] for w in self.status()]
        self.grade("warm", "--stop")
        for pid in pids:
            _wait_gone(pid, 30)


def _within(limit: float, done) -> bool:
    """Whether done() comes true within limit seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return False


def _wait_gone(pid: int, limit: float) -> bool:
    return _within(limit, lambda: not _alive(pid))


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _descriptors(pid: int) -> set[str]:
    """Return what pid's descriptors point at (pipes, sockets, epolls by inode), /dev/null left out."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return found - {os.devnull}


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie does not)."""
    return _state(pid) not in ("Z", "gone")


def _warm_processes(folder: Path) -> list[int]:
    """Return the running warm processes whose socket folder is folder."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if str(folder).encode() in f.read().split(b"\0") and _alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _graders(base: Path) -> dict[int, str]:
    """Return {pid: name} of the grader's running processes that a warm process in base's folder started (its
    environment's TMPDIR), other than warm processes themselves; zombies left out."""
    found, mark = {}, f"TMPDIR={base}".encode()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                ours = mark in f.read().split(b"\0")
        except OSError:
            continue
        name, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()[0]
        if ours and state != "Z" and name.startswith("grade") and name != "grade-warm":
            found[int(entry)] = name
    return found


@contextlib.contextmanager
def _folder():
    """A short socket folder (a socket's path must fit in 108 bytes); its warm processes are stopped at the end."""
    base = Path(tempfile.mkdtemp(prefix="gw"))
    w = Warm(base)
    try:
        yield w
    finally:
        w.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def warm_folder():
    """A socket folder of this test's own."""
    with _folder() as w:
        yield w


@pytest.fixture(scope="module")
def served():
    """A warm process started and serving, shared by the tests that leave it as they found it."""
    with _folder() as w:
        w.start()
        yield w


@pytest.fixture
def own_served(warm_folder):
    """A warm process of this test's own, for one that stops, kills or replaces it."""
    warm_folder.start()
    return warm_folder


def test_a_served_run_prints_exactly_what_a_run_in_its_own_process_prints(served, tmp_path):
    wrong = with_snippet(tmp_path / "wrong", "ex1", (CORPUS / "ex1" / "dbnmeani_lecture_no_keepdim.py").read_text())
    trap = with_snippet(tmp_path / "trap", "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    runs = [
        ("ex1", "--submission", str(REFERENCE)),
        ("ex1", "--submission", str(wrong)),
        ("ex1", "--submission", str(trap), "--level", "full", "--hints"),
        ("ex1", "--submission", str(trap), "--json"),
        ("all", "--submission", str(EXERCISES)),
        ("ex2", "--submission", str(tmp_path / "missing")),  # a usage error: click's message and exit 2
    ]
    before = served.served()
    for args in runs:
        hot, cold = served.grade(*args), served.grade(*args, warm_on=False)
        assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr), args
    assert served.served() - before == len(runs)  # every one was the warm process's


def test_a_run_is_served_in_its_own_folder_with_its_own_umask(served, tmp_path):
    from tests.test_cli import plots_available

    sub = make_submission(tmp_path / "here" / "exercises", {}, base=REFERENCE)
    before = served.served()
    plot = ["--plot", "pic.png"] if plots_available() else []
    got = subprocess.run(
        ["sh", "-c", "umask 077 && exec \"$@\"", "sh", *GRADE, "ex2", *plot],
        env=served.env, cwd=sub.parent, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert got.returncode == 0 and "passed" in got.stdout, got.stderr[-1000:]  # ./exercises of its folder
    if plot:  # written where it ran, as its umask says
        assert (sub.parent / "pic.png").stat().st_mode & 0o777 == 0o600
    assert served.served() == before + 1


def test_every_hostile_case_gets_its_verdict_when_served(served, tmp_path):
    """The walls hold as in-process: each hostile case graded through the warm process gets its pinned verdict."""
    before, wrong = served.served(), []
    for case in HOSTILE:
        _student(tmp_path, case.stem, hostile_expectation(case)[0], case.read_text())
        exercises = sorted(touched(case.read_text()))
        got = served.grade(
            "all" if len(exercises) > 1 else exercises[0], "--submission", str(tmp_path / case.stem), "--json",
            "--timeout", "3",
        )  # fmt: skip
        try:
            wrong.append(wrong_verdict(case, json.loads(got.stdout)))
        except ValueError:
            wrong.append(f"{case.stem}: exit {got.returncode}, no JSON: {got.stderr[-300:]!r}")
    assert [w for w in wrong if w] == []
    assert served.served() - before == len(HOSTILE)
    assert _settled(served.base), _graders(served.base)  # and no run left a process behind


@pytest.mark.parametrize(
    ("sig", "ends"),
    [(signal.SIGINT, (1, "", f"\n{ABORTED}\n")), (signal.SIGTERM, (128 + signal.SIGTERM, "", ""))],
    ids=["ctrl-c", "term"],
)
def test_a_signal_is_relayed_and_ends_the_run_as_in_its_own_process(served, tmp_path, sig, ends):
    with served.slow_run(tmp_path) as (proc, _):
        proc.send_signal(sig)  # the client alone: a terminal's Ctrl-C reaches its foreground group, which it is
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == ends
    assert _settled(served.base)


def _stop_with_ctrl_z(proc: subprocess.Popen, worker: int) -> None:
    """Send the client's job Ctrl-Z; wait until it and the worker are both stopped."""
    os.killpg(proc.pid, signal.SIGTSTP)
    deadline = time.monotonic() + 10
    while (_state(proc.pid), _state(worker)) != ("T", "T"):
        assert time.monotonic() < deadline, (_state(proc.pid), _state(worker))
        time.sleep(0.01)


def test_ctrl_z_stops_the_run_with_its_client_and_fg_goes_on(served, tmp_path):
    with served.slow_run(tmp_path) as (proc, worker):
        _stop_with_ctrl_z(proc, worker)
        os.killpg(proc.pid, signal.SIGCONT)  # fg
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "score 26/26: 26 passed" in out, err[-1000:]


def test_a_client_killed_while_stopped_takes_its_stopped_run_with_it(served, tmp_path):
    with served.slow_run(tmp_path) as (proc, worker):
        _stop_with_ctrl_z(proc, worker)
        proc.kill()  # kill -9 %1
        proc.communicate(timeout=60)
        assert _wait_gone(worker, 10), _state(worker)
    assert _settled(served.base), _graders(served.base)
    assert "0 running" in served.grade("warm").stderr  # so it can still end when idle


def test_a_client_killed_outright_takes_its_run_with_it(served, tmp_path):
    with served.slow_run(tmp_path) as (proc, worker):
        proc.kill()
        proc.communicate(timeout=60)
        assert _wait_gone(worker, 10)
    assert _settled(served.base), _graders(served.base)
    assert served.status()[0]["ours"]  # the warm process itself goes on


def test_a_worker_killed_outright_ends_its_client_the_same_way(served, tmp_path):
    with served.slow_run(tmp_path) as (proc, worker):
        os.kill(worker, signal.SIGKILL)  # as the kernel's out-of-memory killer would
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (-signal.SIGKILL, "")  # the shell says "Killed", as for a run of its own
    assert _settled(served.base), _graders(served.base)


@pytest.mark.parametrize("closed", ["<&-", ">&-", "2>&-"])
def test_a_closed_standard_stream_is_served_as_in_its_own_process(served, closed):
    def once(on: bool):
        env = {**served.env, "GRADER_WARM": "1" if on else "0"}
        line = f'exec "$@" {closed}'
        command = ["sh", "-c", line, "sh", *GRADE, "ex1", "--submission", str(REFERENCE)]
        got = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        return got.returncode, got.stdout, got.stderr

    before = served.served()
    assert once(True) == once(False)
    assert served.served() == before + 1


def test_a_client_that_leaves_at_once_never_orphans_the_warm_process(served):
    """A TERM for a worker that has not yet put its own handlers in place once ran the warm process's (stop), and
    unlinked its socket: the warm process went on, unreachable, holding its lock."""
    import socket

    sock_path = str(next(served.folder.glob("*.sock")))
    for _ in range(30):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock_path)
            request = json.dumps({"argv": ["ex1", "--submission", str(REFERENCE)], "env": {}, "umask": 0o22})
            s.sendall(warm._HEADER.pack(b"R", len(request)) + request.encode())
            s.recv(warm._RECORD.size)  # taken
            null = os.open(os.devnull, os.O_RDWR)
            socket.send_fds(s, [warm._RECORD.pack(b"G", 0)], [null, null, null, null])
            os.close(null)  # then gone at once: the worker is sent TERM
    assert served.status()[0]["ours"] and list(served.folder.glob("*.sock"))
    before = served.served()
    got = served.grade("ex1", "--submission", str(REFERENCE))
    assert got.returncode == 0 and "score 26/26: 26 passed" in got.stdout
    assert served.served() == before + 1
    assert _settled(served.base)


def test_stalled_connections_do_not_hold_up_a_run(served):
    import socket

    sock_path = str(next(served.folder.glob("*.sock")))
    stalled = []
    for k in range(20):  # connected, and silent; or a header, then nothing
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock_path)
        if k % 2:
            s.send(warm._HEADER.pack(b"R", 1000))
        stalled.append(s)
    try:
        before, start = served.served(), time.monotonic()
        got = served.grade("ex1", "--submission", str(REFERENCE))
        took = time.monotonic() - start
    finally:
        for s in stalled:
            s.close()
    assert got.returncode == 0 and "score 26/26: 26 passed" in got.stdout
    assert served.served() == before + 1 and took < warm.REQUEST_S


def test_a_stopped_warm_process_is_waited_for_then_the_run_grades_once_in_its_own_process(own_served):
    pid = own_served.status()[0]["pid"]
    before = own_served.served()
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        got = own_served.grade("ex1", "--submission", str(REFERENCE))
        took = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    assert got.returncode == 0 and got.stdout.count("score 26/26: 26 passed") == 1, got.stderr[-1000:]
    assert took > warm.TAKEN_S
    time.sleep(1)  # the warm process, running again, reads the request the run gave up on: it forks nothing
    assert own_served.served() == before


def test_a_ctrl_c_soon_after_the_hand_over_says_aborted_or_comes_too_late(served):
    results = []
    for k in range(12):
        proc = served.popen("ex1", "--submission", str(REFERENCE))
        deadline = time.monotonic() + 30
        while not any(d.startswith("socket:") for d in _descriptors(proc.pid)):  # connected to the warm process
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.001)
        time.sleep(0.01 * k)  # from the hand-over to the worker's last steps
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if (proc.returncode, out, err) == (1, "", f"\n{ABORTED}\n"):
            results.append("aborted")
        elif proc.returncode in (0, 1) and "score 26/26: 26 passed" in out and err in ("", f"\n{ABORTED}\n"):
            results.append("done")  # it came as the command ended (after the table, "Aborted!" as in-process)
        else:
            results.append(f"exit {proc.returncode}: {out[-200:]!r} {err[-600:]!r}")
    assert set(results) <= {"aborted", "done"} and "aborted" in results, results
    assert _settled(served.base)


def test_a_worker_holds_no_descriptor_of_the_warm_process_but_its_client_and_its_children_none(served, tmp_path):
    warm_pid = served.status()[0]["pid"]
    with served.slow_run(tmp_path) as (_, worker):
        shared = _descriptors(warm_pid) & _descriptors(worker)
        below = [p for p in _graders(served.base) if p != worker and _parent(p) == worker]  # truth server, sandbox
        held = {p: _descriptors(p) & _descriptors(warm_pid) for p in below}
    assert len(shared) == 1 and next(iter(shared)).startswith("socket:"), shared  # the connection to its client
    assert len(below) >= 2 and not any(held.values()), held  # and what it forks holds not even that
    assert _settled(served.base)


def test_another_environment_starts_its_own_warm_process_and_the_old_one_leaves(own_served):
    old = own_served.status()[0]["pid"]
    own_served.env["OMP_NUM_THREADS"] = "1"  # read as torch is imported: the running one cannot serve this
    first = own_served.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
    assert first.returncode == 0
    new = own_served.start()
    assert new["pid"] != old and new["served"] == 0
    assert _wait_gone(old, 30), "the older warm process was not stopped"
    assert [w["pid"] for w in own_served.status()] == [new["pid"]]


def test_an_idle_warm_process_leaves_and_takes_its_socket(warm_folder):
    warm_folder.env[warm.IDLE_ENV] = "1"
    assert warm_folder.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs").returncode == 0
    deadline = time.monotonic() + 90
    while not list(warm_folder.folder.glob("*.sock")):  # listening: then idle for a second
        assert time.monotonic() < deadline, "no warm process started"
        time.sleep(0.01)
    while _warm_processes(warm_folder.folder) or list(warm_folder.folder.iterdir()):
        assert time.monotonic() < deadline, (_warm_processes(warm_folder.folder), list(warm_folder.folder.iterdir()))
        time.sleep(0.05)


def test_a_dead_warm_process_is_replaced_and_its_runs_are_graded_meanwhile(own_served):
    pid = own_served.status()[0]["pid"]
    os.kill(pid, signal.SIGKILL)  # its socket file stays: nothing listens on it
    assert _wait_gone(pid, 10)
    got = own_served.grade("ex1", "--submission", str(REFERENCE))
    assert got.returncode == 0 and "score 26/26: 26 passed" in got.stdout
    assert own_served.start()["pid"] != pid


def test_a_folder_others_can_open_is_never_used(warm_folder):
    warm_folder.folder.mkdir(mode=0o700)
    warm_folder.folder.chmod(0o777)
    got = warm_folder.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
    assert got.returncode == 0 and "score 1/1" in got.stdout
    time.sleep(1)
    assert list(warm_folder.folder.iterdir()) == []  # no warm process started there
    assert "no warm process" in warm_folder.grade("warm").stderr


@pytest.fixture
def short_tmp_path():
    """A folder of this test's own with a short path: a longer one is refused (a socket's path limit)."""
    base = Path(tempfile.mkdtemp(prefix="gw"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_only_a_private_folder_of_this_user_is_taken(short_tmp_path, monkeypatch):
    tmp_path = short_tmp_path
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    mine = tmp_path / f"grade-warm-{os.getuid()}"
    assert warm.folder() == str(mine) and mine.stat().st_mode & 0o777 == 0o700  # made, closed to others
    for mode in (0o750, 0o705, 0o777):
        mine.chmod(mode)
        assert warm.folder() is None, oct(mode)
    mine.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    mine.symlink_to(tmp_path / "elsewhere")
    assert warm.folder() is None  # a link, even to a private folder
    mine.unlink()
    mine.write_text("")
    assert warm.folder() is None
    if os.getuid() == 0:
        mine.unlink()
        mine.mkdir(mode=0o700)
        os.chown(mine, 65534, 65534)
        assert warm.folder() is None  # someone else's


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs a second user (from root)")
def test_another_user_cannot_reach_a_warm_process(served):
    import errno
    import socket

    path = str(next(served.folder.glob("*.sock")))
    pid = os.fork()
    if pid == 0:  # a second user on the same machine, as nobody
        code = 3
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
            code = 0
        except PermissionError as exc:
            code = 1 if exc.errno == errno.EACCES else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1  # refused at the folder (0700): never connected


def test_off_says_so_and_starts_nothing(warm_folder):
    warm_folder.env["GRADER_WARM"] = "0"
    got = warm_folder.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
    assert got.returncode == 0
    time.sleep(1)
    assert not warm_folder.folder.exists()
    assert "GRADER_WARM=0 turns it off" in warm_folder.grade("warm").stderr


def test_the_client_imports_neither_torch_nor_click(tmp_path):
    code = (
        "import sys\nfrom grader.cli import warm\nwarm.enabled(), warm.folder(), warm.key()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'click')))"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert got.stdout.strip() == "[]", got.stderr[-2000:]


WORKER_KEY = """
import os, socket, sys
from grader.cli import main, warm
from grader.truth import fixture

inherited = fixture._RUN_KEY
ours, theirs = socket.socketpair()
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # a worker, as the warm process forks it, running `grade warm` (which grades nothing)
    os.close(r)
    main.BEFORE_EXIT.append(lambda code: os.write(w, fixture._RUN_KEY))
    null = os.open(os.devnull, os.O_RDWR)
    request = {"argv": ["warm"], "env": {**os.environ, "GRADER_WARM": "0"}, "umask": 0o22}
    warm._run_worker(theirs, [null, null, null, os.open("/", os.O_RDONLY)], request, [ours.fileno()], set())
os.close(w)
drawn = os.read(r, 64)
os.waitpid(pid, 0)
print(len(drawn) == 32 and drawn != inherited)
"""


def test_each_worker_draws_its_own_run_key():
    """A worker is a fork of the warm process: it draws the run key again (warm._run_worker), or every run it
    served would share the warm process's hidden geometries (the key is what they are drawn from without a course
    secret, truth/fixture.py)."""
    got = subprocess.run([sys.executable, "-c", WORKER_KEY], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.stdout.strip() == "True", got.stderr[-2000:]


def _settled(base: Path, limit: float = 10) -> bool:
    """Whether every process of the run ends (the warm process aside)."""
    return _within(limit, lambda: not _graders(base))
