"""The sandbox's walls: one bad function costs one item, a killed grader leaves nothing, a dead worker is retried."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from grader.classroom import pool
from grader.grading.runner import TORCH_NOT_IMPLEMENTED, grade
from grader.grading.scan import escapes, scan
from grader.sandbox import MALFORMED, Limits, jail, wire
from tests.conftest import CORPUS, REFERENCE, make_submission, with_snippet
from tests.hostile_files import evaded

HONEST = Path(__file__).parent / "honest"

LIMITS = Limits(timeout=2.0, memory_mb=512)
FIRST, MIDDLE, LAST = "dlogprobs", "dh", "dC"
SIGNATURES = {FIRST: "logprobs", MIDDLE: "dlogits, W2", LAST: "C, Xb, demb"}
BODIES = {
    "loop": "    while True:\n        pass\n",
    "crash": "    import torch\n    torch.os.kill(torch.os.getpid(), 11)\n",
    "memory": "    import torch\n    return torch.ones(2**31)\n",
}
STATUS = {"loop": "timeout", "crash": "error", "memory": "error"}


@pytest.mark.parametrize("where", [FIRST, MIDDLE, LAST])
@pytest.mark.parametrize("how", sorted(BODIES))
def test_a_bad_function_costs_exactly_its_own_item(tmp_path, where, how):
    sub = with_snippet(tmp_path, "ex1", f"def {where}({SIGNATURES[where]}):\n{BODIES[how]}")
    result = grade(sub, ("ex1",), limits=LIMITS)
    bad = [i for i in result.items if i.status != "passed"]
    assert [i.name for i in bad] == [where], [(i.name, i.status, i.message) for i in bad]
    assert bad[0].status == STATUS[how], bad[0].message
    if how == "loop":
        assert "within 2 s" in bad[0].message  # the limit the user set, not a multiple of it


def _one_item(tmp_path, exercise: str, snippet: str, item: str):
    """Grade one item of the reference with a snippet appended to its exercise file; return that item."""
    (result,) = grade(with_snippet(tmp_path, exercise, snippet), (exercise,), only=[item], limits=LIMITS).items
    return result


def test_the_hidden_geometry_gets_its_own_deadline(tmp_path):
    hang_on_second = "def dlogprobs(logprobs, Yb, n):\n    import torch\n    while n != 32:\n        pass\n"
    hang_on_second += "    d = torch.zeros_like(logprobs)\n    d[range(n), Yb] = -1.0 / n\n    return d\n"
    item = _one_item(tmp_path, "ex1", hang_on_second, "dlogprobs")
    assert item.status == "failed" and "hardcoded-size" in item.traps and "timed out" in item.message


def test_malformed_replies_are_that_items_error_never_the_graders(tmp_path):
    forged = (Path(__file__).parent / "hostile" / "forged_wrong_types.py").read_text()
    result = grade(with_snippet(tmp_path, "ex1", forged), ("ex1",), limits=LIMITS)
    bad = [i for i in result.items if i.status != "passed"]
    assert [i.name for i in bad] == ["dprobs"] and MALFORMED in bad[0].message


def _pids_with_uid(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
            if line.split()[1:2] == [str(uid)]:
                pids.append(int(entry.name))
    return pids


@pytest.mark.skipif(not (sys.platform == "linux" and jail.is_root()), reason="the uid switch needs root")
def test_a_killed_grader_leaves_no_sandbox_running(tmp_path):
    sub = with_snippet(tmp_path / "sub", "ex1", f"def {FIRST}(logprobs):\n{BODIES['loop']}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "ex1", "--submission", str(sub), "--timeout", "60", "--only", FIRST],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    uid = jail.sandbox_uid(1000 + proc.pid % 1_000_000)
    deadline = time.monotonic() + 30
    while not _pids_with_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _pids_with_uid(uid), "the sandbox never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while _pids_with_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pids_with_uid(uid), "a sandbox outlived the grader that started it"


FORK_UNDER_TERM = """
import json, os, signal
from grader.sandbox import jail, zygote
from grader.classroom import pool
from grader.truth import server

class Boom(Exception):
    pass

def on_term(*_):
    raise Boom

signal.signal(signal.SIGTERM, on_term)
armed = [False]

def before():  # a TERM that arrives while fork runs its handlers
    if armed[0]:
        armed[0] = False
        os.kill(os.getpid(), signal.SIGTERM)

os.register_at_fork(before=before)

def child_exits(pid):
    if pid == 0:
        os._exit(0)

CALLS = {
    "jail.fork": lambda: child_exits(jail.fork()),
    "jail.fork_child": lambda: child_exits(jail.fork_child()[0]),
    "jail._fork_through_helper": lambda: child_exits(jail._fork_through_helper()[0]),
    "zygote.start": lambda: zygote.start(),
    "pool._fork": lambda: child_exits(pool._fork("grade-test")),
    "truth.server._fork": lambda: server._fork(lambda: None, lambda: None),
}
got = {}
for name, call in CALLS.items():
    armed[0] = True
    try:
        call()
        got[name] = "lost"
    except Boom:
        got[name] = "raised"
print(json.dumps(got))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="fork and namespaces are Linux's")
@pytest.mark.parametrize("mode", ["as started", "normal user"])
def test_a_term_that_arrives_during_any_fork_still_unwinds_the_grader(mode):
    """A TERM sent while fork runs its at-fork handlers is raised after fork returns, never lost in a handler."""
    command = [sys.executable, "-c", FORK_UNDER_TERM]
    if mode == "normal user":
        if not jail.is_root() or shutil.which("unshare") is None:
            pytest.skip("a normal user is made from root with unshare")
        command = ["unshare", "--user", "--map-user=1000", "--map-group=1000", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got == dict.fromkeys(got, "raised") and len(got) == 6, got


@pytest.mark.skipif(not (sys.platform == "linux" and jail.is_root()), reason="the uid switch needs root")
def test_a_terminated_grader_stops_its_sandbox_and_removes_its_jail(tmp_path):
    sub = with_snippet(tmp_path / "sub", "ex1", f"def {FIRST}(logprobs):\n{BODIES['loop']}")
    cmd = [sys.executable, "-m", "grader", "ex1", "--submission", str(sub), "--timeout", "60", "--only", FIRST]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uid = jail.sandbox_uid(1000 + proc.pid % 1_000_000)
    deadline = time.monotonic() + 30
    while not _pids_with_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.terminate()
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    assert not list(Path(tempfile.gettempdir()).glob(f"{jail.JAIL_PREFIX}{proc.pid}-*")), "the jail was left behind"
    deadline = time.monotonic() + 5
    while _pids_with_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pids_with_uid(uid)


def test_code_nested_too_deeply_to_parse_costs_only_its_own_items(tmp_path):
    from grader.classroom.batch import grade_batch

    subs = tmp_path / "subs"
    make_submission(subs / "calm")
    make_submission(subs / "deep", {"ex2.py": "def dlogits(logits):\n    return " + "-" * 20000 + "1\n"})
    make_submission(subs / ("x" * 250))  # a student id longer than a file name may be
    summary = grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, progress=False)
    assert summary["students"] == 3 and (tmp_path / "out" / "report.html").exists()
    deep = json.loads((tmp_path / "out" / "students" / "deep.json").read_text())
    assert [i["status"] for i in deep["items"] if i["exercise"] == "ex2"] == ["error"]
    assert deep["score"] == 40


@pytest.mark.parametrize("run", [pool.run, pool.run_graders], ids=["per-student", "long-lived"])
def test_a_grading_process_that_dies_is_retried_once_then_recorded(run):
    marker = Path(os.environ.get("TMPDIR", "/tmp")) / f"grader-pool-test-{os.getpid()}"
    marker.unlink(missing_ok=True)

    def grade_one(task):
        if task == "always":
            os.kill(os.getpid(), signal.SIGKILL)
        if task == "once" and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        if task == "hang":
            time.sleep(60)
        if task == "bug":
            raise KeyError("a grader bug")
        return {"task": task, "pid": os.getpid()}

    tasks = ["ok", "once", "always", "hang", "bug", "a", "b", "c", "d"]
    try:
        results = {t: (r, why) for t, r, why in run(tasks, grade_one, jobs=2, deadline=3)}
    finally:
        marker.unlink(missing_ok=True)
    assert sorted(results) == sorted(tasks)
    assert results["ok"][0]["task"] == "ok" and results["once"][0]["task"] == "once"
    assert results["always"][0] is None and "SIGKILL" in results["always"][1]
    assert results["hang"][0] is None and "longer than 3 s" in results["hang"][1]
    assert results["bug"][0] is None and "KeyError: 'a grader bug'" in results["bug"][1]
    pids = [results[t][0]["pid"] for t in ("ok", "once", "a", "b", "c", "d")]
    if run is pool.run_graders:
        assert len(set(pids)) < len(pids)  # a grading process grades student after student
    else:
        assert len(set(pids)) == len(pids)


def test_a_long_lived_grader_is_put_back_before_each_student_and_its_sandboxes_come_from_a_zygote():
    from grader.sandbox import Worker

    state = {}

    def between():  # runs as the grading process starts; what it returns runs before every later student
        state["student"] = None
        return lambda: state.update(student=None)

    def grade_one(task):
        left, state["student"] = state["student"], task  # what the student before left behind (None: put back)
        with Worker(Limits(timeout=5)) as worker:
            stat = Path(f"/proc/{worker.pid}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            parent_name = Path(f"/proc/{parent}/comm").read_text().strip()
        return {"left": left, "mine": os.getpid(), "parent": parent, "parent_name": parent_name}

    results = [r for _, r, _ in pool.run_graders([1, 2, 3, 4], grade_one, jobs=1, deadline=30, between=between)]
    assert [r["left"] for r in results] == [None] * 4
    assert len({r["mine"] for r in results}) == 1  # one grading process for the four
    assert all(r["parent"] != r["mine"] and r["parent_name"] == "grade-zygote" for r in results)


def _sandboxed_pid(task):
    """Start and stop a sandbox, then return this grading process's pid (a grading process's work, in short)."""
    from grader.sandbox import Worker

    with Worker(Limits(timeout=5)) as worker:
        assert worker.ask({"op": "load", "path": "ex.py", "text": "x = 1\n"}).ok
    return {"task": task, "pid": os.getpid()}


def test_a_grading_process_is_replaced_after_its_share_of_students_without_charging_anyone(monkeypatch):
    monkeypatch.setattr(pool, "GRADER_STUDENTS", 2)
    got = list(pool.run_graders(list(range(5)), _sandboxed_pid, jobs=1, deadline=30, retries=0))
    assert [why for _, _, why in got] == [""] * 5
    pids = [r["pid"] for _, r, _ in sorted(got, key=lambda x: x[0])]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


def test_a_grading_process_whose_zygote_died_ends_and_the_next_student_gets_a_new_one():
    from grader.sandbox import zygote

    def grade_one(task):
        result = _sandboxed_pid(task)
        if task == "zygote killed":  # (the OOM killer, say; a sandbox cannot signal it: see syscalls.py)
            os.kill(zygote.current().pid, signal.SIGKILL)
            time.sleep(0.2)
        return result

    tasks = ["first", "zygote killed", "next", "last"]
    got = {t: (r, why) for t, r, why in pool.run_graders(tasks, grade_one, jobs=1, deadline=30, retries=0)}
    assert all(why == "" for _, why in got.values()), got
    assert got["first"][0]["pid"] == got["zygote killed"][0]["pid"] != got["next"][0]["pid"] == got["last"][0]["pid"]


def test_a_student_graded_after_others_in_one_grading_process_gets_what_they_get_alone(tmp_path):
    from grader.classroom.batch import grade_one_student
    from grader.grading.runner import between_students
    from grader.spec.policy import Policy
    from grader.submissions.intake import discover
    from grader.truth import fixture

    make_submission(tmp_path / "subs" / "alice", {"ex2.py": "def dlogits(x):\n    return x\n"})
    trap = (REFERENCE / "ex1.py").read_text() + "\n" + (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text()
    make_submission(tmp_path / "subs" / "bob", {"ex1.py": trap})
    make_submission(tmp_path / "subs" / "carol")
    entries, _ = discover(tmp_path / "subs")
    work = {e.student: (e, LIMITS, None, Policy()) for e in entries}

    def grade_one(args):
        return {"built": len(fixture.BUILT), "result": grade_one_student(args)}

    def graded(names):
        tasks = [work[n] for n in names]
        got = pool.run_graders(tasks, grade_one, jobs=1, deadline=120, between=between_students)
        return {task[0].student: result for task, result, _ in got}

    together, alone = graded(["alice", "bob", "carol"]), graded(["bob"])
    assert len({r["built"] for r in together.values()}) == 1  # each starts with the fixtures the first found
    assert together["bob"]["result"] == alone["bob"]["result"]
    assert together["bob"]["result"]["score"] < together["carol"]["result"]["score"] == 42


def test_work_for_later_grading_processes_runs_once_beside_the_first(monkeypatch):
    log, start = [], pool.start_job

    def logged_start(task, *args, **kwargs):
        log.append(f"start {task}")
        return start(task, *args, **kwargs)

    monkeypatch.setattr(pool, "start_job", logged_start)
    done = [
        t
        for t, r, _ in pool.run(
            [1, 2, 3], lambda t: {"t": t}, jobs=2, deadline=30, after_first=lambda: log.append("after")
        )
    ]
    assert sorted(done) == [1, 2, 3]
    assert log == ["start 1", "after", "start 2", "start 3"]


@pytest.mark.parametrize(
    "divided",
    [
        "        d = (f(x + h) - f(x - h)) / (2 * h)\n",
        "        d = ((f(x + h) - f(x - h))  # central\n             / (2 * h))\n",
        "        d = ((f(x + h) - f(x - h))  # central (2nd order) difference\n             / (2 * h))\n",
        "        d = ((f(x + h) - f(x - h))\n/ (2 * h))\n",  # a continuation line in column 0
        "        d = (f(x + h) - f(x - h)) \\\n            / (2 * h)\n",
    ],
)
def test_a_finite_difference_is_flagged_however_its_division_is_laid_out(divided):
    """The scan parses only text that can divide a difference: a comment, or a line break, before the `/` hides
    none (found by a reviewing helper: a comment holding a `)`, and a continuation line in column 0)."""
    from grader.grading.scan import numeric

    text = "import torch\n\n\ndef dx(x, f, h):\n    for k in range(3):\n" + divided + "    return d\n"
    assert [f.what for f in numeric("ex1", text)] == ["a finite difference in dx() (the forward pass evaluated twice)"]
    assert numeric("ex1", text.replace("- f(x - h)", "- g(x)")) == ()  # two different functions: no flag


NUMGRAD = """import torch


def numgrad(f, x, h=1e-3):
    g = torch.zeros_like(x)
    for i in range(x.numel()):
        e = torch.zeros_like(x).view(-1)
        e[i] = h
        g.view(-1)[i] = (f(x + e.view_as(x)) - f(x - e.view_as(x))) / (2 * h)
    return g


def dprobs(probs, dlogprobs):
    return (1.0 / probs) * dlogprobs


if __name__ == "__main__":
    print(numgrad(lambda p: p.log().sum(), torch.rand(3) + 1) - dprobs(torch.rand(3) + 1, torch.ones(3)))
"""


@pytest.mark.parametrize(
    "change, flagged",
    [
        ((), False),  # named only in the __main__ block: a check run by hand, never by the grader
        (("    return (1.0 / probs) * dlogprobs", "    return numgrad(lambda p: p.log().sum(), probs)"), True),
        (("if __name__", "table = globals()\nif __name__"), True),  # reflection could reach it by name
        (("def dprobs(probs, dlogprobs):", "def dprobs(probs, dlogprobs):  # see numgrad"), True),  # named outside
        (('if __name__ == "__main__":', "if True:"), True),  # a block that runs
        (("    return (1.0 / probs) * dlogprobs", "    return \uff4eumgrad(lambda p: p.log().sum(), probs)"), True),
        (("def dprobs(", "# \x1c\x1d\x1e\x85\f\ndef dprobs("), False),  # ends no line the parser counts
        (("    return (1.0 / probs) * dlogprobs", "    # \x1c\x1c\x1c\x1c\n    return numgrad(len, probs)"), True),
    ],
)
def test_a_finite_difference_named_only_by_the_main_block_is_not_flagged(change, flagged):
    from grader.grading.scan import numeric

    text = NUMGRAD.replace(*change) if change else NUMGRAD
    assert bool(numeric("ex1", text)) == flagged


def test_private_internals_are_flagged_from_source_and_correct_alternatives_are_not():
    for path in sorted(CORPUS.rglob("*.py")) + sorted(REFERENCE.glob("*.py")):
        assert scan("ex", path.read_text()) == (), path
    flags = scan("ex3", "import torch\ndef f(x):\n    torch._C._set_grad_enabled(True)\n    g = torch.sys.modules\n")
    assert [(f.line, f.what) for f in flags][:2] == [
        (3, "private attribute ._C"),
        (3, "private attribute ._set_grad_enabled"),
    ]
    assert any(f.what == "interpreter internals .modules" for f in flags)
    assert scan("ex1", "x = getattr(torch, name)")[0].what == "reflection getattr()"


def test_a_flag_quotes_its_own_line_after_characters_that_end_no_line_the_parser_counts():
    """\\f, \\x1c and \\x85 end a line for str.splitlines, not for the parser: a flag's quote and line stay its own."""
    from grader.grading.scan import numeric

    odd = "# \x1c\x1d\x1e\x85\f, then a CRLF ending\r\n"
    flags = scan("ex1", odd + "import torch\ng = torch._C\n")
    assert [(f.line, f.code) for f in flags] == [(3, "g = torch._C")]
    assert [(f.line, f.code) for f in escapes("ex1", odd + "y = f.__globals__\n")] == [(2, "y = f.__globals__")]
    text = odd + NUMGRAD.replace('if __name__ == "__main__":', "if True:")
    line = text.count("\n", 0, text.index("def numgrad")) + 1
    assert [(f.line, f.code) for f in numeric("ex1", text)] == [(line, "def numgrad(f, x, h=1e-3):")]


def test_getattr_with_a_literal_name_is_read_as_the_attribute_written_out():
    """`getattr(x, "shape", None)` is `x.shape` with a default: flagged only where `x.shape` would be."""
    for honest in ('n = getattr(x, "shape", None)', 'setattr(opt, "lr", 0.1)', 'delattr(cache, "last")'):
        assert scan("ex1", "import torch\n" + honest) == (), honest
    for reaching in ('getattr(torch, "_C")', 'getattr(x, "modules")', 'getattr(x, "tanh_backward")'):
        assert "reflection getattr()" in {f.what for f in scan("ex1", f"import torch\ny = {reaching}")}, reaching
    for computed in ("getattr(x, name)", "getattr(*args)", 'getattr(x, "a b")', 'getattr(x, "shape", getattr)'):
        assert "reflection getattr()" in {f.what for f in scan("ex1", f"y = {computed}")}, computed
    assert [f.what for f in scan("ex1", "g = getattr")] == ["reflection getattr()"]  # the builtin itself, held
    # a route out spelled with a literal name is refused as the attribute written out is, not only flagged
    for route in ('getattr(torch.set_num_threads, "__globals__")', 'getattr(f, "__code__")', 'getattr(g, "gi_frame")'):
        written_out = route.replace("getattr(", "").replace(', "', ".").rstrip('")')
        assert escapes("ex1", f"y = {written_out}"), written_out
        assert [f.line for f in escapes("ex1", f"import torch\n\ny = {route}")] == [3], route


def test_a_docstring_is_text_for_readers_unless_it_is_used_as_a_format_string():
    doc = 'def dh(h, dh):\n    """Same formula as torch\'s tanh_backward (see _C)."""\n    return (1 - h**2) * dh\n'
    assert scan("ex1", doc) == () and scan("ex1", doc.replace("(see _C)", "_C")) == ()
    assert scan("ex1", 'def f():\n    x = 1\n    "tanh_backward"\n    return x')  # a string statement, not a docstring
    fields = 'def f():\n    """{0.__class__.__init__.__globals__}"""\n    return f.__doc__.format(torch)\n'
    assert [f.what[:42] for f in scan("ex1", fields)] == ["a format string reading attributes by name"]
    assert scan("ex1", "x = torch.\\\n    _C") and scan("ex1", "from _thread import x")  # spelled across lines
    assert scan("ex1", "x = \uff47etattr(torch, n)")  # identifiers are NFKC: a fullwidth g is a g
    kernels = scan("ex1", "def dh(dh, h):\n    return torch.ops.aten.tanh_backward(dh, h)\n")
    assert {f.what for f in kernels} == {
        "torch's operator registry or compiler .ops",
        "torch's own backward kernel .tanh_backward",
    }  # a gradient nobody derived: aten's backward kernels (and aten.grad, which is autograd) sit behind torch.ops
    assert scan("ex1", 'k = getattr(aten, "native_batch_norm_backward")')
    for imported in ("from operator import attrgetter as pick", "from operator import *", "from math import vars"):
        assert scan("ex2", imported)[0].what.startswith("reflection imported by name"), imported
    assert scan("ex2", "from operator import add, mul") == ()
    ordinary = 'super().__init__()\nv = torch.__version__\nk = "_".join(p)\ns = f"{n}_direct"\np = t._replace(a=1)\n'
    assert scan("ex2", ordinary) == ()  # public API with underscores: no flag
    formatter = 'import string\nf = string.Formatter().get_field("0." + chr(95) * 2 + "class", (x,), {})[0]\n'
    assert {f.what for f in scan("ex2", formatter)} >= {"interpreter internals .Formatter"}
    assert scan("ex2", 'def f(x: "torch._C._EngineBase"): pass')[0].what.startswith("a string naming internals")
    pick = "from torch.ao.quantization.utils import getattr_from_fqn as pick\n"
    assert scan("ex2", pick)[0].what == "reflection imported by name: getattr_from_fqn"  # getattr by a longer name
    fetched = "class Root:\n    module = torch\n\n\nm = torch.fx.Interpreter.fetch_attr(Root, 'module.nn')\n"
    assert scan("ex2", fetched)[0].what == "interpreter internals .fetch_attr"  # a dotted name walked by getattr
    for module_by_attribute in ("m = torch.inspect.getmembers(torch)", "f = torch.serialization.pickle.loads(b)"):
        assert scan("ex2", module_by_attribute), module_by_attribute  # a reflective module, reached as an attribute


def test_routes_out_of_the_exercise_are_escapes_and_nothing_honest_is_one():
    """A frame, raw memory, a format field path, the object graph: each form of each is an escape; nothing else."""
    from grader.grading.scan import escapes

    for path in sorted(CORPUS.rglob("*.py")) + sorted(REFERENCE.glob("*.py")) + sorted(HONEST.glob("*.py")):
        assert escapes("ex", path.read_text()) == (), path
    routes = {
        "b = (lambda: 0).__code__": "private attribute .__code__",
        "async def g():\n    yield\nb = g().ag_frame.f_builtins": "interpreter internals .ag_frame",
        "from numpy.lib.stride_tricks import as_strided": "reflection imported by name: as_strided",
        "v = np.lib.stride_tricks.as_strided(a, (1,), (0,))": "interpreter internals .stride_tricks",
        "class R:\n    @property\n    def __array_interface__(self): ...": "raw memory: __array_interface__",
        "d = {'__array_struct__': 1}": "raw memory: __array_struct__",
        "from string import Formatter": "reflection imported by name: Formatter",
        "objs = torch.sys.modules['gc'].get_objects()": "interpreter internals .get_objects",
        "match x:\n    case object(__globals__=g): pass": "attribute read by a match pattern: __globals__",
        "import ctypes": "interpreter module ctypes",
        "t = torch.export.default_decompositions()": "interpreter internals .default_decompositions",
        "f = logging.currentframe()": "interpreter internals .currentframe",
        "w = logging.traceback.walk_stack(None)": "interpreter internals .traceback",
    }
    for code, what in routes.items():
        found = escapes("ex2", "import torch\nimport numpy as np\n" + code + "\n")
        assert found and found[0].what.startswith(what) and found[0].escape, (code, found)
    for honest in (  # a debug print that forgot its f, .format of public attributes, logging's own Formatter
        'print("{d.shape[0]} rows")  # the case of a missing f',
        'print("{0.shape[0]} of {0.dtype.itemsize}".format(d))',
        'h.setFormatter(logging.Formatter("%(message)s"))\nfrom logging import Formatter',
    ):
        assert scan("ex2", honest + "\n") == (), honest
    for honest in (  # a __repr__ by str.format, a dict key that is an everyday word
        'def __repr__(self):\n    return "{0.__class__.__name__}(n={0._n})".format(self)',
        'failures.append({"error": str(e), "traceback": tb})',
    ):
        assert scan("ex2", honest + "\n") == (), honest
    main = 'def f(x):\n    return x\n\n\nif __name__ == "__main__":\n    print(f.__code__, e.__traceback__)\n'
    assert escapes("ex2", main) == () and scan("ex2", main) == ()  # never runs when graded: neither
    caught = "try:\n    raise E\nexcept E as __name__:\n    pass\n"  # an exception whose __eq__ says yes to all
    for binds in ('__name__ = "__main__"\n', caught, "import m as __name__\n", '(__name__ := "__main__")\n'):
        assert escapes("ex2", binds + main), binds  # unless the file could make it run
    logged = "import logging\nlog = logging.getLogger(__name__)\n" + main
    assert escapes("ex2", logged) == () and scan("ex2", logged) == ()  # reading __name__ binds nothing
    assert escapes("ex2", "g = getattr(m, n)\n" + main)  # or reflection that runs could
    for tame in (
        "x = getattr(torch, name)",
        "import sys\nprint(sys.modules)",
        "n = torch._C",
        "exec(code)",
        "s = '{0.sys.modules[x].y}'.format(torch)",  # reads text, calls nothing; the child's wipes guard what
    ):
        assert escapes("ex2", tame + "\n") == (), tame  # flagged for the instructor, still run
        assert scan("ex2", tame + "\n"), tame


def test_a_file_with_a_route_out_is_not_run_and_its_other_exercises_are(tmp_path):
    """The refusal is an error on every item of that file, naming the line; ex1's items still pass."""
    from grader.grading.scan import REFUSED

    snippet = "async def _g():\n    yield\n\n\nREAL = _g().ag_frame.f_builtins\n"
    sub = with_snippet(tmp_path, "ex2", snippet)
    result = grade(sub, ("ex1", "ex2"), limits=Limits(timeout=30))
    ex2 = [i for i in result.items if i.exercise == "ex2"]
    assert ex2 and all(i.status == "error" for i in ex2)
    head = REFUSED.split("{where}")[0]
    assert all(i.message.startswith(head) and "ex2.py line" in i.message and "ag_frame" in i.message for i in ex2)
    assert all(i.status == "passed" for i in result.items if i.exercise == "ex1")
    assert result.extra["flags"]["private_internals"][0]["escape"] is True


def test_the_fallback_sandbox_grades_without_fork(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_SANDBOX", "spawn")
    sub = with_snippet(tmp_path, "ex1", "def dh(dlogits, W2):\n    return dlogits @ W2\n")
    result = grade(sub, ("ex1",), only=["dlogprobs", "dh"], limits=Limits(timeout=30))
    by = {i.name: i for i in result.items}
    assert by["dlogprobs"].status == "passed"
    assert by["dh"].status in ("failed", "error") and by["dh"].status != "passed"


def test_student_commands_run_through_the_fallback_and_say_what_is_off():
    env = {**os.environ, "GRADER_SANDBOX": "spawn"}
    cmd = [sys.executable, "-m", "grader", "ex2", "--submission", str(REFERENCE)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ex2.dlogits" in done.stdout and "passed" in done.stdout
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("sandbox")]  # one line, no more
    assert line.startswith("sandbox (spawn):") and "system-call allow-list" in line and len(line) < 300
    verbose = subprocess.run([*cmd, "--verbose"], capture_output=True, text=True, env=env, timeout=120)
    listed = [ln.strip() for ln in verbose.stderr.splitlines() if ln.strip().startswith("missing (")]
    assert "missing (minimum): every capability dropped" in listed and "missing (extra): own PID namespace" in listed
    as_json = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120)
    walls = json.loads(as_json.stdout)["sandbox"]
    assert walls["backend"] == "spawn" and "every capability dropped" in walls["missing_minimum"]
    assert as_json.stderr == ""  # --json: one JSON object and nothing else


@pytest.mark.skipif(sys.platform != "linux", reason="jails are Linux-only")
def test_the_jail_of_a_killed_grader_is_swept_by_the_next(tmp_path, monkeypatch):
    # a temporary folder of this test's own: a grader running beside it (another test worker) makes a jail too,
    # and that sweeps the dead one's before this test could see it there
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pid = os.fork()
    if pid == 0:  # a grader killed before its atexit could remove its jail
        jail.Jail()
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    left = list(Path(tempfile.gettempdir()).glob(f"{jail.JAIL_PREFIX}{pid}-*"))
    assert len(left) == 1, "the killed process made no jail"
    live = jail.Jail()  # making a jail sweeps the dead ones
    assert not left[0].exists(), "a dead grader's jail was left for good"
    jail.sweep_stale()
    assert os.path.isdir(live.path), "a live grader's jail was swept"
    live.close()


def test_the_one_child_is_forked_before_anything_is_judged(monkeypatch):
    """A child forked after judging would inherit its leftovers (truth minus answer, a trap's candidates)."""
    from grader.grading import runner
    from grader.sandbox import worker

    judged, forked_at = [0], []
    real_judge, real_start = runner.judge, worker.Worker.start_fork

    def counting_judge(*args, **kwargs):
        judged[0] += 1
        return real_judge(*args, **kwargs)

    def recording_start(self):
        forked_at.append(judged[0])
        return real_start(self)

    monkeypatch.setattr(runner, "judge", counting_judge)
    monkeypatch.setattr(worker.Worker, "start_fork", recording_start)
    result = grade(REFERENCE, limits=LIMITS)
    assert all(i.status == "passed" for i in result.items)
    assert judged[0] > 30 and forked_at == [0], f"children forked after {forked_at} judgements"  # one per student


SECRET_HUNT = """
def dlogprobs(logprobs):
    import torch
    found = []
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = exc.__traceback__.tb_frame
    while frame is not None:  # up the stack this child inherited from the grader
        for value in list(frame.f_locals.values()):
            secret = getattr(value, "secret", None)
            if isinstance(secret, str):
                found.append(secret)
        frame = frame.f_back
    for obj in torch.sys.modules["gc"].get_objects():
        secret = getattr(obj, "secret", None) if type(obj).__name__ == "Policy" else None
        if isinstance(secret, str):
            found.append(secret)
    raise RuntimeError("hunt: " + (",".join(found) or "nothing"))
"""


def test_the_course_secret_cannot_be_found_from_a_sandbox(tmp_path):
    from grader.spec.policy import Policy

    secret = "a-course-secret-nobody-may-read"
    hunt = evaded(SECRET_HUNT)  # past the scan's refusal of frames: the walls behind it must hold on their own
    result = grade(with_snippet(tmp_path / "sub", "ex1", hunt), policy=Policy(secret=secret), limits=LIMITS)
    item = next(i for i in result.items if i.id == "ex1.dlogprobs")
    assert "hunt: nothing" in item.message, item.message
    assert secret not in json.dumps(result.to_dict())


def test_a_background_helper_returns_its_value_or_says_how_it_died():
    from grader.classroom.batch import _similarity

    assert pool.Background(lambda: {"pairs": [], "compared": 3}).result() == {"pairs": [], "compared": 3}
    dead = pool.Background(lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert "SIGKILL" in _similarity(dead)["error"]  # the summary says so; the gradebook is written all the same
    stopped = pool.Background(lambda: time.sleep(60))
    stopped.kill()  # reaped at once: no child left behind (the conftest checks)
    stuck = pool.Background(lambda: time.sleep(60))
    with pytest.raises(RuntimeError, match="longer than 0.5 s"):
        stuck.result(timeout=0.5)  # a hung comparison never holds up the gradebook


HOLD_ROOT = """
import torch
fcntl, os = torch.sys.modules["fcntl"], torch.os
HELD = os.open("/", os.O_RDONLY)
fcntl.flock(HELD, fcntl.LOCK_EX)  # held for as long as this sandbox lives
"""
PROBE_ROOT = """
import torch
fcntl, os = torch.sys.modules["fcntl"], torch.os
fd = os.open("/", os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    raise RuntimeError("a neighbour holds my root: a channel between sandboxes") from None
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the allow-list is Linux's")
def test_neighbouring_sandboxes_have_nothing_to_lock():
    """flock on "/" (or on fd 0) was a channel between two sandboxes: no path opens, no lock is taken, at all."""
    from grader.sandbox import Worker, reap, set_slot

    workers = []
    try:
        with jail.held():
            for slot, text in (
                (0, HOLD_ROOT),
                (1, PROBE_ROOT),
                (1, "import torch\ntorch.sys.modules['fcntl'].flock(0, 2)\n"),
            ):
                set_slot(slot)
                workers.append(Worker(LIMITS))
                reply = workers[-1].ask({"op": "load", "path": "ex1.py", "text": text})
                assert reply.ok and not reply.header.get("ok"), reply.header
                assert reply.header["error"]["type"] == "PermissionError", reply.header
    finally:
        set_slot(None)
        for w in workers:
            w.close()
        reap(wait=True)


@pytest.mark.skipif(sys.platform != "linux", reason="jails are Linux-only")
def test_the_sweep_never_follows_a_link(tmp_path):
    target = tmp_path / "someone_elses_folder"
    target.mkdir()
    target.chmod(0o751)
    dead = 2**22 + 12345  # above pid_max's default: no live process has it
    bait = Path(tempfile.gettempdir()) / f"{jail.JAIL_PREFIX}{dead}-{jail._pid_namespace()}-bait"
    bait.symlink_to(target)
    try:
        jail.sweep_stale()
        assert target.is_dir() and (target.stat().st_mode & 0o777) == 0o751, "the sweep followed a link"
    finally:
        bait.unlink()


def test_the_truth_is_computed_in_a_helper_never_in_the_process_that_forks_sandboxes(monkeypatch, no_truth_built):
    """Autograd's intermediates, freed here, would lie in every later child's memory for a scan to find."""
    from grader.sandbox import arena
    from grader.truth import fixture

    here, real = [], fixture.autograd_truth
    monkeypatch.setattr(fixture, "autograd_truth", lambda *a, **k: here.append(1) or real(*a, **k))
    result = grade(REFERENCE, limits=LIMITS)
    assert all(i.status == "passed" for i in result.items)
    assert here == [], "the truth was computed in the grading process"
    assert all(arena.ARENA.holds(t) for fx in fixture.BUILT.values() for t in fx.secrets())


def test_only_the_exercises_that_run_get_a_hidden_truth(tmp_path, monkeypatch, no_truth_built):
    """A partial submission (Ex2 alone here) costs the truth of its own exercises, not of all four; the lecture's
    truth of the others (their items' shapes) is still built in the helper, never here."""
    from grader.truth import fixture

    here, real = [], fixture.autograd_truth
    monkeypatch.setattr(fixture, "autograd_truth", lambda *a, **k: here.append(1) or real(*a, **k))
    sub = make_submission(tmp_path / "sub", {"ex2.py": (REFERENCE / "ex2.py").read_text()}, base=None)
    result = grade(sub, limits=LIMITS)
    assert here == [], "the truth was computed in the grading process"
    assert {i.exercise for i in result.items if i.status == "passed"} == {"ex2"}
    assert {i.status for i in result.items if i.exercise != "ex2"} == {"not_attempted"}
    hidden = [g for g, _, _ in fixture.BUILT if g not in (fixture.PRIMARY, fixture.EX4_PRIMARY)]
    assert len(hidden) == 1, hidden


@pytest.mark.skipif(sys.platform != "linux", reason="process names are Linux-only")
def test_each_process_of_the_grader_says_what_it_is_in_ps():
    from grader.sandbox import Worker

    with jail.held(), Worker(LIMITS) as worker:
        assert worker.ask({"op": "load", "path": "ex2.py", "text": "x = 1\n"}).ok
        assert Path(f"/proc/{worker.pid}/comm").read_text().strip() == "grade-sandbox"
    assert pool.in_child(lambda: Path("/proc/self/comm").read_text().strip()) == "grade-student"
    assert pool.Background(lambda: Path("/proc/self/comm").read_text().strip()).result() == "grade-helper"


def test_a_table_of_the_lecture_training_steps_fails_on_the_hidden_geometry(tmp_path):
    from grader.truth import fixture

    lecture = fixture.build(fixture.EX4_PRIMARY, None, ex4=True)  # public: the lecture's seed, batches and steps
    table = [
        {g: (list(truth[g].shape), truth[g].numpy().tobytes().hex()) for g in fixture.EX4_GRADS}
        for _, truth in lecture.steps
    ]
    looked_up = (
        f"import torch\n\nTABLE = {table!r}\nSTEP = [0]\n\n\ndef backward(Xb):\n"
        "    row = TABLE[min(STEP[0], len(TABLE) - 1)]\n    STEP[0] += 1\n"
        "    return {g: torch.frombuffer(bytearray.fromhex(h), dtype=torch.float32).view(shape)"
        " for g, (shape, h) in row.items()}\n"
    )
    table_sub = make_submission(tmp_path / "table", {"ex4.py": looked_up}, base=None)
    reference = make_submission(tmp_path / "reference", base=REFERENCE)
    [table_item] = grade(table_sub, ("ex4",), only=["training"], limits=LIMITS).items
    [right] = grade(reference, ("ex4",), only=["training"], limits=LIMITS).items
    assert (right.status, right.hidden) == ("passed", "passed")
    assert (table_item.status, table_item.traps, table_item.hidden) == ("failed", ["hardcoded-size"], "failed")
    assert table_item.message.startswith("Right on the lecture's fixture, but it returned the wrong shape")


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/fd is Linux-only")
def test_grading_again_and_again_leaks_no_descriptor(tmp_path):
    sub = make_submission(tmp_path / "sub", base=REFERENCE)  # e.g. check() run again and again in one kernel
    grade(sub, ("ex2",), limits=LIMITS)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        grade(sub, ("ex2", "ex3"), limits=LIMITS)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(sys.platform != "linux", reason="the truth server is Linux-only")
def test_the_truth_server_builds_what_a_helper_would_and_a_dead_one_costs_nothing(monkeypatch, no_truth_built):
    from grader.truth import fixture
    from grader.truth import server as prebuild

    keys = [(fixture.hidden_geometry("a course secret", bytes([k])), None, k == 1) for k in range(4)]
    prebuild.prebuild(keys[:2])  # a helper of its own: what the server must match
    helper = {k: fixture.BUILT.pop(k) for k in keys[:2]}
    forked, real = [], prebuild.fork_helper
    monkeypatch.setattr(prebuild, "fork_helper", lambda todo: forked.append(1) or real(todo))
    server = prebuild.serve()
    try:
        prebuild.prebuild(keys[:2])
        assert forked == [], "a helper was forked although the server was up"
        os.kill(server.pid, signal.SIGSTOP)  # a server that stops answering costs one wait, then a helper
        monkeypatch.setattr(prebuild, "SERVER_WAIT", 0.5)
        prebuild.prebuild(keys[3:])
        assert forked == [1] and keys[3] in fixture.BUILT
        os.kill(server.pid, signal.SIGCONT)
        for k in keys[:2]:
            a, b = helper[k], fixture.BUILT[k]
            assert len(a.steps) == len(b.steps) == (fixture.HIDDEN_TRAINING_STEPS if k[2] else 0)
            assert all(torch.equal(x, y) for x, y in zip(a.secrets(), b.secrets(), strict=True))
            assert torch.equal(a.Xb, b.Xb) and all(torch.equal(a.params[p], b.params[p]) for p in a.params)
        os.kill(server.pid, signal.SIGKILL)
        os.waitpid(server.pid, 0)
        prebuild.prebuild(keys[2:3])  # the server is gone: a helper builds it, and nothing is built here
        assert forked == [1, 1] and keys[2] in fixture.BUILT
    finally:
        server.close()
    assert not prebuild.serving()


@pytest.mark.skipif(sys.platform != "linux", reason="the truth server is Linux-only")
def test_a_truth_server_builds_its_ahead_keys_before_any_request(tmp_path, monkeypatch, no_truth_built):
    """`grade exN` forks the server as soon as torch is imported: the lecture's truth is built while the submission
    is read, before the server is asked; an ahead key that cannot be built costs nothing but itself."""
    from grader.truth import fixture
    from grader.truth import server as prebuild

    lecture, broken = (fixture.PRIMARY, None, False), (fixture.PRIMARY, str(tmp_path / "no_such_names.txt"), False)
    log, real_build = tmp_path / "built", fixture.build

    def build(*key, **kwargs):  # the server is forked from here: it logs what it builds, and when
        if key not in fixture.BUILT:
            with log.open("a") as f:
                f.write(f"{key[1]}\n")
        return real_build(*key, **kwargs)

    monkeypatch.setattr(fixture, "build", build)
    prebuild.prebuild([lecture])  # a helper's: what the server must match
    helper = fixture.BUILT.pop(lecture)
    log.unlink()
    forked, real = [], prebuild.fork_helper
    monkeypatch.setattr(prebuild, "fork_helper", lambda todo: forked.append(1) or real(todo))
    server = prebuild.serve(ahead=[broken, lecture])
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().count("\n") == 2) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.read_text().splitlines() == [broken[1], "None"], "the server did not build ahead"
        # it holds none of the grader's output: a reader of `grade ex1 | ...` waits for no one else to end
        assert [os.readlink(f"/proc/{server.pid}/fd/{fd}") for fd in (1, 2)] == [os.devnull] * 2
        prebuild.prebuild([lecture])
        assert forked == [] and log.read_text().splitlines() == [broken[1], "None"], "built again when asked"
        got = fixture.BUILT[lecture]
        assert all(torch.equal(x, y) for x, y in zip(helper.secrets(), got.secrets(), strict=True))
        assert torch.equal(helper.Xb, got.Xb) and helper.noise == got.noise
    finally:
        server.close()
    assert not prebuild.serving()


@pytest.mark.skipif(sys.platform != "linux", reason="the truth server is Linux-only")
def test_a_sandbox_forked_beside_a_truth_server_holds_only_its_own_descriptors():
    """A child holds 0 (an empty pipe), 1 and 2 (its output), 3 and 4 (its requests and replies), and nothing else:
    not the truth server's socket, which the process that forks it holds."""
    from grader.sandbox import Worker, reap
    from grader.truth import server as prebuild

    probe = (
        "import torch\nos = torch.sys.modules['os']\nheld = []\nfor fd in range(64):\n    try:\n"
        "        os.get_inheritable(fd)\n        held.append(fd)\n    except OSError:\n        pass\n"
        "raise ValueError(f'held {held}')\n"
    )
    server = prebuild.serve()
    try:
        assert server.sock.fileno() <= 63, "the probe sees fds 0-63 only (the allow-list's own-fd bound)"
        with jail.held(), Worker(LIMITS) as worker:
            reply = worker.ask({"op": "load", "path": "ex1.py", "text": probe})
        assert reply.ok and reply.header["error"]["message"] == "held [0, 1, 2, 3, 4]", reply.header
    finally:
        server.close()
        reap(wait=True)


@pytest.mark.skipif(sys.platform != "linux", reason="grade batch needs Linux")
def test_a_batch_builds_every_hidden_truth_in_its_server_not_in_helpers(tmp_path, monkeypatch):
    from grader.classroom.batch import grade_batch
    from grader.truth import server as prebuild

    marker = tmp_path / "forked"
    real = prebuild.fork_helper

    def fork_helper(todo):
        with marker.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(todo)

    monkeypatch.setattr(prebuild, "fork_helper", fork_helper)  # the grading processes inherit it
    subs = tmp_path / "subs"
    for name in ("ada", "ben"):
        make_submission(subs / name, {"ex2.py": (REFERENCE / "ex2.py").read_text() + f"# {name}\n"}, base=None)
    summary = grade_batch(subs, tmp_path / "out", jobs=2, limits=LIMITS, progress=False, similarity=False)
    assert summary["items"]["ex2.dlogits"]["passed"] == 2
    forked_by = set(marker.read_text().split()) if marker.exists() else set()
    assert forked_by <= {str(os.getpid())}, "a grading process forked a helper"  # the lecture's truth, here
    assert not prebuild.serving()


@pytest.mark.skipif(sys.platform != "linux", reason="the truth server is Linux-only")
def test_a_grading_process_slow_to_read_its_truth_stalls_no_other(monkeypatch, no_truth_built):
    from grader.truth import fixture
    from grader.truth import server as prebuild

    geometries = [fixture.hidden_geometry("a course secret", bytes([k])) for k in range(7)]
    big = [(g, None, True) for g in geometries[:6]]  # megabytes of truth: more than a pipe holds
    forked, real = [], prebuild.fork_helper
    monkeypatch.setattr(prebuild, "fork_helper", lambda todo: forked.append(1) or real(todo))
    monkeypatch.setattr(prebuild, "SERVER_WAIT", 5.0)
    server = prebuild.serve()
    try:
        slow = prebuild.start(big)  # asked, and not read yet (its student's code is still being scanned, say)
        started = time.monotonic()
        prebuild.prebuild([(geometries[6], None, False)])  # another student's, asked after
        assert forked == [] and time.monotonic() - started < 5.0, "the server waited for the slow reader"
        prebuild.finish(slow)
        assert forked == [] and all(k in fixture.BUILT for k in big)
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_a_file_of_twenty_thousand_flags_is_scanned_in_linear_time():
    """A long line of `'_C',` used to be copied once per flag: minutes, in the grader's own process. (A file past
    spec/parse.py's bound, like the old 1 MB line, is not parsed at all: test_bounds.py.)"""
    text = "x = [" + "'_C'," * 24_000 + "]  # \U0001f600\n"
    flags = scan("ex1", text)
    assert len(flags) == 20 and flags[0].what.startswith("a string naming internals")
    assert flags[0].code == text.strip()[:200]


def test_the_students_own_table_says_their_code_was_flagged(tmp_path):
    from grader.grading.scan import FLAGGED
    from grader.show import table as report

    ex2 = (REFERENCE / "ex2.py").read_text() + "\n\ndef _peek():\n    import torch\n    return torch._C\n"
    flagged = grade(make_submission(tmp_path / "flagged", {"ex2.py": ex2}, base=None), ("ex2",), limits=LIMITS)
    calm = grade(make_submission(tmp_path / "calm", base=REFERENCE), ("ex2",), limits=LIMITS)
    shown = " ".join(report.table(flagged, color=False).split())
    line = ex2.splitlines().index("    return torch._C") + 1
    assert FLAGGED.split(":")[0] in shown and f"ex2.py line {line}: private attribute ._C" in shown
    assert FLAGGED.split(":")[0] not in " ".join(report.table(calm, color=False).split())
    assert flagged.items[0].status == "passed"  # a flag changes no grade


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_a_tensor_without_readable_values_is_named_not_blamed_on_the_students_code(tmp_path):
    """A meta or nested tensor is a returned value the wire cannot carry: say what it is, never 'not attempted'."""
    odd = (
        "import torch\n\n\n"
        "def dlogprobs(logprobs, Yb, n):\n    return torch.empty(logprobs.shape, device='meta')\n\n\n"
        "def dprobs(probs, dlogprobs):\n    return torch.nested.nested_tensor([torch.zeros(3), torch.zeros(2)])\n"
    )
    result = grade(with_snippet(tmp_path, "ex1", odd), ("ex1",), only=["dlogprobs", "dprobs"], limits=LIMITS)
    meta, nested = result.items
    assert meta.status == nested.status == "error"
    assert f"Returned a {wire.unreadable(torch.empty(1, device='meta'))};" in meta.message
    assert "nested tensor" in wire.unreadable(torch.nested.nested_tensor([torch.zeros(1)]))
    assert f"Returned a {wire.unreadable(torch.nested.nested_tensor([torch.zeros(1)]))};" in nested.message


def test_a_sparse_gradient_with_indices_out_of_range_is_refused_at_the_students_line(tmp_path):
    """Building it raises (invariant checks are on in a child); one built with them off is refused before to_dense."""
    bad = (
        "import torch\n\n\n"
        "def dembcat(emb, dhprebn, W1):\n"
        "    rows, cols = torch.tensor([0, 1, 5]), torch.tensor([0, 9999, 1, 2, 3])\n"
        "    return torch.sparse_csr_tensor(rows, cols, torch.ones(5), (2, 3))\n\n\n"
        "def dC(C, Xb, demb):  # graded after dembcat, in the same child\n"
        "    torch.sparse.check_sparse_tensor_invariants.disable()\n"
        "    return torch.sparse_coo_tensor(torch.tensor([[0, 100]]), torch.ones(2, C.shape[1]), C.shape)\n"
    )
    result = grade(with_snippet(tmp_path, "ex1", bad), ("ex1",), only=["dC", "dembcat"], limits=LIMITS)
    by = {i.name: i for i in result.items}
    assert by["dembcat"].status == "error" and "col_indices" in by["dembcat"].message
    assert "at line" in by["dembcat"].message  # raised where it was built
    assert by["dC"].status == "error" and "found index 100" in by["dC"].message  # refused before to_dense
    assert all("sandbox stopped" not in i.message for i in result.items)


def test_values_are_read_as_they_are_not_as_their_storage(tmp_path):
    """A lazily negated view's storage holds the opposite values: the wire resolves it, so minus the truth fails."""
    negated = (
        "import torch\n\n\n"
        "def dlogprobs(logprobs, Yb, n):\n"
        "    t = torch.zeros_like(logprobs)\n"
        "    t[range(n), Yb] = -1.0 / n\n"
        "    buf = torch.zeros(t.numel() + 2)\n"
        "    buf[1 : 1 + t.numel()] = t.flatten()\n"
        "    imag = torch.view_as_complex(buf.view(-1, 2)).conj().imag  # storage: t; values: -t\n"
        "    return torch.as_strided(imag, t.shape, (t.shape[1], 1), 1)\n"
    )
    item = _one_item(tmp_path, "ex1", evaded(negated), "dlogprobs")  # as_strided would be refused: the wire's test
    assert item.status == "failed" and "sign-flip" in item.traps, (item.status, item.traps)


def test_a_not_implemented_error_from_torch_is_an_error_at_the_students_line(tmp_path):
    """Only the stub's own `raise NotImplementedError` means 'not attempted'."""
    sub = "import torch\n\n\nclass S(torch.Tensor):\n    pass\n\n\n"
    sub += "def dC(C, Xb, demb):\n    return torch.zeros_like(C).to_sparse().as_subclass(S)\n"
    item = _one_item(tmp_path, "ex1", sub, "dC")
    assert item.status == "error" and "Raised NotImplementedError" in item.message and "line" in item.message
    assert TORCH_NOT_IMPLEMENTED in item.message


def test_one_unreadable_gradient_costs_only_its_own_ex4_item(tmp_path):
    meta = (
        "_reference_backward = backward\n\n\n"
        "def backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits):\n"
        "    grads = _reference_backward(Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits)\n"
        "    grads['dW1'] = grads['dW1'].to('meta')\n"
        "    return grads\n"
    )
    result = grade(with_snippet(tmp_path, "ex4", meta), ("ex4",), limits=LIMITS)
    by = {i.name: i for i in result.items}
    assert by["dW1"].status == "error" and wire.unreadable(torch.empty(1, device="meta")) in by["dW1"].message
    assert all(i.status == "passed" for n, i in by.items() if n not in ("dW1", "training")), by


@pytest.mark.skipif(sys.platform != "linux", reason="fork is Linux's")
def test_a_zygote_forgets_every_secret_and_arms_itself_before_its_first_fork():
    """child.prepare_forks, run once in a zygote, does for its children what each child did for itself."""
    from grader.sandbox import arena, child, syscalls
    from grader.spec.policy import Policy
    from grader.truth import fixture

    sealed = arena.ARENA.seal(torch.full((64,), 3.0))  # the lecture's truth, as the scheduler holds it
    policy = Policy(secret="the course secret")
    fixture.hidden_geometry(None, b"a student")  # the run's key in use
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            child.prepare_forks()
            got = {
                "truth": bool(sealed.numpy().any()),
                "secret": policy.secret,
                "run key": fixture._RUN_KEY,
                "armed": child._IN_STUDENT[0],
                "open in builtins": "open" in child._student_builtins(),
                "allow-list built": 1 in syscalls._BUILT or syscalls.sc is None,
                "frozen": gc.get_freeze_count() > 0,
            }
            os.write(w, json.dumps(got, default=str).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    got = json.loads(os.read(r, 4096) or b"{}")
    os.close(r)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    expected = {"truth": False, "secret": None, "run key": "b''", "armed": True, "open in builtins": False}
    assert got == {**expected, "allow-list built": True, "frozen": True}
    assert policy.secret == "the course secret" and sealed.sum() == 192  # the parent keeps its own


def test_sys_and_types_are_stand_ins_with_the_everyday_names_only():
    """`import sys` gives stdout, stderr, path and the like; sys.modules, frames and hooks say what there is."""
    from grader.sandbox.standins import MISSING, STAND_INS, stand_in

    fake = stand_in("sys")
    assert fake.stdout is sys.stdout and fake.stderr is sys.stderr and fake.version_info == sys.version_info
    assert fake.path == sys.path and fake.path is not sys.path  # a copy: appending changes nothing of the child's
    assert fake.argv == [""]  # the child's command line is the grader's (in a batch, the instructor's paths)
    assert {n for n in vars(fake) if not n.startswith("__")} == STAND_INS["sys"] - {"stdout", "stderr"}
    for reach in ("modules", "_getframe", "settrace", "setprofile", "meta_path", "addaudithook", "exc_info", "stdin"):
        with pytest.raises(AttributeError) as raised:
            getattr(fake, reach)
        offered = ", ".join(sorted(STAND_INS["sys"]))
        assert str(raised.value) == MISSING.format(module="sys", attr=reach, offered=offered)
    assert stand_in("types").SimpleNamespace is __import__("types").SimpleNamespace
    for reach in ("FunctionType", "CodeType", "FrameType", "ModuleType"):
        with pytest.raises(AttributeError) as raised:
            getattr(stand_in("types"), reach)
        assert str(raised.value) == MISSING.format(module="types", attr=reach, offered="SimpleNamespace")


def test_a_file_that_reads_sys_modules_gets_an_error_that_says_what_sys_offers(tmp_path):
    """In a real child: `from sys import modules` fails the load; `sys.modules` in a function fails that item."""
    from grader.sandbox.standins import MISSING, STAND_INS

    reads = "import sys\n\n\ndef dW2(h, dlogits):\n    return sys.modules['torch'].zeros(h.shape[1], 27)\n"
    result = grade(with_snippet(tmp_path, "ex1", reads), ("ex1",), limits=Limits(timeout=30))
    by_id = {i.id: i for i in result.items}
    offered = MISSING.format(module="sys", attr="modules", offered=", ".join(sorted(STAND_INS["sys"])))
    assert by_id["ex1.dW2"].status == "error" and offered in by_id["ex1.dW2"].message
    assert all(i.status == "passed" for i in result.items if i.id != "ex1.dW2")
    assert [f["what"] for f in result.extra["flags"]["private_internals"]] == ["interpreter internals .modules"]
    loads = with_snippet(tmp_path / "b", "ex1", "from sys import stderr, modules\n")
    items = grade(loads, ("ex1",), limits=Limits(timeout=30)).items
    assert all(i.status == "error" and f"BlockedImport: {offered}" in i.message for i in items)


def test_a_finite_difference_reached_without_its_name_stays_flagged():
    """Found by a reviewing helper: a method called through its object (`Check()(...)`, which is `__call__`) or a
    function kept by its decorator (`@HELPERS.append`) is used by graded code that never spells its name."""
    from grader.grading.scan import numeric

    loop = (
        "    g = torch.zeros_like(x)\n    for i in range(x.numel()):\n        e = torch.zeros_like(x).view(-1)\n"
        "        e[i] = h\n        g.view(-1)[i] = (f(x + e.view_as(x)) - f(x - e.view_as(x))) / (2 * h)\n"
        "    return g\n"
    )
    method = (
        "import torch\n\n\nclass Check:\n    def __call__(self, f, x, h=1e-3):\n"
        + loop.replace("\n    ", "\n        ").replace("    g =", "        g =", 1)
        + "\n\ndef dprobs(probs, dlogprobs):\n    return Check()(lambda q: (q.log() * dlogprobs).sum(), probs)\n"
        '\n\nif __name__ == "__main__":\n    pass  # by hand: __call__ against my derivation\n'
    )
    kept = (
        "import torch\n\nHELPERS = []\n\n\n@HELPERS.append\ndef numgrad(f, x, h=1e-3):\n"
        + loop
        + "\n\ndef dprobs(probs, dlogprobs):\n    return HELPERS[0](lambda q: (q.log() * dlogprobs).sum(), probs)\n"
        '\n\nif __name__ == "__main__":\n    print(numgrad)\n'
    )
    for text in (method, kept):
        compile(text, "ex1.py", "exec")
        assert numeric("ex1", text), text


def test_a_main_block_never_runs_whatever_the_file_does_to_its_name(tmp_path):
    """Found by a reviewing helper: enum.global_enum writes a class's members into its module's globals, so a file
    could set __name__ to "__main__" with nothing the scan reads, and run the block whose reaches it leaves alone.
    The child compiles each `if __name__ == "__main__":` test as False."""
    snippet = (
        "import enum\n\n\nclass Meta(enum.EnumMeta):\n    @property\n    def __members__(cls):\n"
        '        return {"_" * 2 + "name" + "_" * 2: "_" * 2 + "main" + "_" * 2}\n\n\n'
        "class E(enum.Enum, metaclass=Meta):\n    A = 1\n\n\nenum.global_enum(E)\n"
        'RAN = __name__ == "__main__"\n\n\nif __name__ == "__main__":\n    g = (lambda: 0).__globals__\n\n'
        "    def dlogprobs(logprobs, Yb, n):\n        raise RuntimeError('the main block ran')\n\n\n"
        "def dprobs(probs, dlogprobs):\n    assert RAN, 'the name was not set: the test proves nothing'\n"
        "    return (1.0 / probs) * dlogprobs\n"
    )
    result = grade(with_snippet(tmp_path, "ex1", snippet), ("ex1",), limits=Limits(timeout=30))
    bad = [(i.id, i.status, i.message[:100]) for i in result.items if i.status != "passed"]
    assert bad == [] and "flags" not in result.extra, (bad, result.extra)
