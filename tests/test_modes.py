"""The walls in every setting: the hostile corpus graded as root, as a normal user, without CAP_SYS_ADMIN, and as PID 1.

Each mode runs the real `grade batch` command under a wrapper that makes the setting (issue #19's four modes). In
each, every hostile case gets its pinned verdict, calm students keep byte-identical files, and the sandbox's minimum
walls (the allow-list, dropped capabilities, rlimits) are up.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, EXERCISES, REFERENCE, make_submission
from tests.hostile_files import HOSTILE, wrong_verdict
from tests.hostile_files import expectation as hostile_expectation
from tests.test_batch import _student
from tests.test_honest import BUNDLES, exercise_text

ROOT = Path(__file__).resolve().parents[1]
CALM = ("alice", "bob", "carol")
SECRET = 'secret = "the four modes share one hidden geometry"\n'


def _wrap(mode: str, command: list[str]) -> list[str]:
    if mode == "root":
        return command
    if mode == "normal-user":
        return ["unshare", "--user", "--map-user=1000", "--map-group=1000", *command]
    if mode == "no-cap-sys-admin":
        return ["capsh", "--drop=cap_sys_admin", "--", "-c", "exec " + shlex.join(command)]
    if mode == "pid-1":
        return ["unshare", "--pid", "--fork", "--mount-proc", *command]
    raise ValueError(mode)


MODES = ("root", "normal-user", "no-cap-sys-admin", "pid-1")
TOOLS = {"normal-user": "unshare", "no-cap-sys-admin": "capsh", "pid-1": "unshare"}


@pytest.fixture(scope="module")
def stormy_class(tmp_path_factory):
    subs = tmp_path_factory.mktemp("modes_subs")
    (subs / "course.toml").write_text(SECRET)
    _student(subs, "alice")
    _student(subs, "bob", "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    _student(subs, "carol", base=EXERCISES)
    for k, bundle in enumerate(BUNDLES):  # every honest habit, grouped as tests/test_honest.py grades them
        files = {f"{ex}.py": exercise_text(cases, ex)[0].decode("utf-8-sig") for ex, cases in bundle.items()}
        make_submission(subs / f"honest_{k}", files, base=REFERENCE)
    for case in sorted(CORPUS.glob("ex*/*_ok.py")):  # every correct alternative
        _student(subs, f"ok_{case.parent.name}_{case.stem}", case.parent.name, case.read_text())
    for case in HOSTILE:
        _student(subs, f"hostile_{case.stem}", hostile_expectation(case)[0], case.read_text())
    subs.chmod(0o755)
    return subs


@pytest.fixture(scope="module")
def runs(stormy_class, tmp_path_factory):
    """Grade the class once per mode; return {mode: out folder, or why it could not run}."""
    if sys.platform != "linux" or os.getuid() != 0:
        pytest.skip("the four modes are made from root on Linux (as CI runs)")
    got = {}
    for mode in MODES:
        if mode in TOOLS and shutil.which(TOOLS[mode]) is None:
            got[mode] = f"{TOOLS[mode]} is not installed"
            continue
        out = tmp_path_factory.mktemp(f"modes_{mode}")
        command = [sys.executable, "-m", "grader", "batch", str(stormy_class), "--out", str(out)]
        # 6, not the README's 3: a case making 12,000 refused system calls once took 3 s beside the suite
        command += ["--jobs", "2", "--timeout", "6", "--no-similarity"]
        proc = subprocess.run(_wrap(mode, command), cwd=ROOT, capture_output=True, text=True, timeout=600)
        if not (out / "summary.json").is_file():
            got[mode] = f"exit {proc.returncode}: {proc.stderr[-2000:]}"
            continue
        got[mode] = out
    return got


@pytest.mark.parametrize("mode", MODES)
def test_the_minimum_walls_are_up_in_every_mode(runs, mode):
    out = runs[mode]
    assert isinstance(out, Path), out
    sandbox = json.loads((out / "summary.json").read_text())["sandbox"]
    assert sandbox["missing_minimum"] == [] and sandbox["unsafe"] is False, sandbox


@pytest.mark.parametrize("mode", MODES)
def test_calm_students_are_byte_identical_in_every_mode(runs, mode):
    out, root = runs[mode], runs["root"]
    assert isinstance(out, Path) and isinstance(root, Path), (out, root)
    for student in CALM:
        assert (out / "students" / f"{student}.json").read_bytes() == (
            root / "students" / f"{student}.json"
        ).read_bytes(), student


@pytest.mark.parametrize("mode", MODES)
def test_honest_habits_and_correct_alternatives_get_full_marks_and_no_flag_in_every_mode(runs, mode):
    out = runs[mode]
    assert isinstance(out, Path), out
    hurt = []
    for path in sorted((out / "students").glob("*.json")):
        if not path.stem.startswith(("honest_", "ok_", "alice")):
            continue
        result = json.loads(path.read_text())
        traps = sorted({t for i in result["items"] for t in i["traps"]})
        if result["score"] != result["max_score"] or traps or result.get("flags"):
            hurt.append(f"{path.stem}: {result['score']}/{result['max_score']} {traps} {result.get('flags')}")
    assert hurt == []


@pytest.mark.parametrize("mode", MODES)
def test_every_hostile_case_gets_its_verdict_in_every_mode(runs, mode):
    out = runs[mode]
    assert isinstance(out, Path), out
    wrong = [
        wrong_verdict(case, json.loads((out / "students" / f"hostile_{case.stem}.json").read_text()))
        for case in HOSTILE
    ]
    assert [w for w in wrong if w] == []


def test_a_run_without_the_minimum_walls_is_refused_unless_unsafe(tmp_path, monkeypatch):
    """No allow-list here (as on a machine without libseccomp): grade batch refuses, and says which wall."""
    from grader.classroom import batch
    from grader.sandbox import jail

    monkeypatch.setattr(batch, "protections", lambda: jail.Protections(rlimits=True, caps=True))
    make_submission(tmp_path / "subs" / "alice")
    with pytest.raises(jail.WallsMissing, match="system-call allow-list"):
        batch.grade_batch(tmp_path / "subs", tmp_path / "out", jobs=1, progress=False)
    assert not (tmp_path / "out").exists()
