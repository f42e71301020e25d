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
from grader.truth import fixture
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

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*GRADE, *args], env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

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


def _wait_gone(pid: int, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


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
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
    slow = with_snippet(tmp_path / "slow", "ex1", SLOW_EX1)
    proc = served.popen("ex1", "--submission", str(slow))
    _wait_for_sandbox(proc, served.base)
    proc.send_signal(sig)  # the client alone: a terminal's Ctrl-C reaches its foreground group, which it is
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == ends
    assert _settled(served.base)


def test_ctrl_z_stops_the_run_and_fg_goes_on(served, tmp_path):
    slow = with_snippet(tmp_path / "slow", "ex1", SLOW_EX1)
    proc = served.popen("ex1", "--submission", str(slow))
    _wait_for_sandbox(proc, served.base)
    proc.send_signal(signal.SIGTSTP)
    deadline = time.monotonic() + 10
    while _state(proc.pid) != "T" or {_state(p) for p, n in _graders(served.base).items() if n == "grade"} != {"T"}:
        assert time.monotonic() < deadline, {pid: (name, _state(pid)) for pid, name in _graders(served.base).items()}
        time.sleep(0.05)
    proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "score 26/26: 26 passed" in out, err[-1000:]


def test_a_client_killed_outright_takes_its_run_with_it(served, tmp_path):
    slow = with_snippet(tmp_path / "slow", "ex1", SLOW_EX1)
    proc = served.popen("ex1", "--submission", str(slow))
    _wait_for_sandbox(proc, served.base)
    proc.kill()
    proc.communicate(timeout=60)
    assert _settled(served.base), _graders(served.base)
    assert served.status()[0]["ours"]  # the warm process itself goes on


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
    for k in range(14):
        proc = served.popen("ex1", "--submission", str(REFERENCE))
        time.sleep(0.06 + 0.01 * k)  # from the client's first steps to the worker's last
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


def test_a_worker_holds_no_descriptor_of_the_warm_process_but_its_client(served, tmp_path):
    slow = with_snippet(tmp_path / "slow", "ex1", SLOW_EX1)
    warm_pid = served.status()[0]["pid"]
    proc = served.popen("ex1", "--submission", str(slow))
    _wait_for_sandbox(proc, served.base)
    worker = next(p for p, n in _graders(served.base).items() if n == "grade")
    shared = _descriptors(warm_pid) & _descriptors(worker)
    proc.kill()
    proc.communicate(timeout=60)
    assert len(shared) == 1 and next(iter(shared)).startswith("socket:"), shared  # the connection to its client
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


@pytest.mark.parametrize("mode", [0o755, 0o777])
def test_a_folder_others_can_open_is_never_used(warm_folder, mode):
    warm_folder.folder.mkdir(mode=0o700)
    warm_folder.folder.chmod(mode)
    got = warm_folder.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
    assert got.returncode == 0 and "score 1/1" in got.stdout
    time.sleep(1)
    assert list(warm_folder.folder.iterdir()) == []  # no warm process started there
    assert "no warm process" in warm_folder.grade("warm").stderr


def test_a_link_in_place_of_the_folder_is_never_used(warm_folder, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    warm_folder.folder.symlink_to(target)
    got = warm_folder.grade("ex1", "--submission", str(REFERENCE), "--only", "dlogprobs")
    assert got.returncode == 0
    time.sleep(1)
    assert list(target.iterdir()) == []


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


def test_the_client_imports_neither_torch_nor_click():
    code = (
        "import sys\nfrom grader.cli import warm\nwarm.enabled(), warm.folder(), warm.key()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'click')))"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == "[]", got.stderr[-2000:]


def test_each_run_draws_its_own_hidden_geometry_key():
    """A worker is a fork of the warm process: it draws the run key again (warm._run_worker), or every run it
    served would share the warm process's hidden geometries."""
    kept = fixture._RUN_KEY
    first = fixture.hidden_geometry(None, b"same files")
    fixture.new_run_key()
    drawn = {fixture.hidden_geometry(None, b"same files") for _ in range(3)}
    assert len(drawn) == 1  # within a run: one geometry
    again = set()
    for _ in range(6):
        fixture.new_run_key()
        again.add(fixture.hidden_geometry(None, b"same files"))
    fixture._RUN_KEY = kept  # the rest of the suite's runs in this process keep theirs
    fixture.hidden_geometry.cache_clear()
    assert len(again | {first}) > 1


def _wait_for_sandbox(proc: subprocess.Popen, base: Path, limit: float = 60) -> None:
    """Wait until a sandbox runs the submission's file (a grade-sandbox exists) and a moment more."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and "grade-sandbox" not in _graders(base).values():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.5)


def _settled(base: Path, limit: float = 10) -> bool:
    """Whether every process of the run ends (the warm process aside)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not _graders(base):
            return True
        time.sleep(0.05)
    return False
