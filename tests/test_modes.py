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
from tests.hostile_files import HOSTILE, parts, touched, wrong_verdict
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


@pytest.fixture(scope="module")
def autograder_source(tmp_path_factory):
    """The Gradescope autograder zip, built and unzipped (mode bits kept) as Gradescope does."""
    import zipfile

    from grader.ship import gradescope
    from grader.spec.policy import Policy

    if sys.platform != "linux" or os.getuid() != 0 or shutil.which("capsh") is None:
        pytest.skip("the no-CAP_SYS_ADMIN mode is made from root on Linux with capsh (as CI runs)")
    base = tmp_path_factory.mktemp("gradescope_modes")
    course = Policy(secret="the autograder's own secret, fixed", hidden_visibility="visible")
    out = gradescope.build_autograder_zip(base / "autograder.zip", ROOT, policy=course)
    source = base / "source"
    with zipfile.ZipFile(out) as zf:
        for info in zf.infolist():
            zf.extract(info, source)
            if (info.external_attr >> 16) & 0o777:
                os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777)
    return source


def _stage(root: Path, files: dict[str, str]) -> Path:
    """Lay out an /autograder tree for these submission files; return its root."""
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    return root


def _env(source: Path) -> dict:
    return dict(os.environ, AUTOGRADER_SOURCE=str(source), PYTHONPATH=str(source), PYTHON=sys.executable)


def _results(root: Path) -> dict:
    results = json.loads((root / "results" / "results.json").read_text())
    results.pop("execution_time", None)
    return results


def _autograde(source: Path, root: Path, files: dict[str, str]) -> dict:
    """Run run_autograder without CAP_SYS_ADMIN (a default Docker container) on these files; return results.json."""
    _stage(root, files)
    command = _wrap("no-cap-sys-admin", ["bash", str(source / "run_autograder")])
    env = dict(_env(source), AUTOGRADER_ROOT=str(root))
    proc = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _results(root)


# what run_autograder runs for one submission (python -m grader.ship.gradescope), for several in one interpreter
_MANY = (
    "import sys\nfrom grader.ship.gradescope import main\n"
    "for root in sys.argv[2:]:\n    main(['--root', root, '--course', sys.argv[1]])\n"
)
# the channels a run could leave open for the next one (locks, IPC, memory, a lingering child): each of these gets
# a run_autograder of its own, as Gradescope gives every upload
CHANNELS = (
    "lock_ranges_ex1_to_ex2",
    "sysv_shm_ex1_to_ex2",
    "sysv_sem_memory_escape",
    "posix_mqueue_ex1_to_ex2",
    "socket_oracle",
    "chroot_climb_reads_reference",
    "pdeathsig_lingers",
    "trap_texts_copied_out",
    "forged_digest_flag_free",
)


def _autograde_many(source: Path, roots: list[Path]) -> None:
    """Grade several staged trees without CAP_SYS_ADMIN, as run_autograder's Python does, in one interpreter."""
    command = _wrap("no-cap-sys-admin", [sys.executable, "-c", _MANY, str(source / "course.toml"), *map(str, roots)])
    proc = subprocess.run(command, cwd=source, env=_env(source), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_gradescope_autograder_without_cap_sys_admin_holds_against_every_hostile_case(autograder_source, tmp_path):
    """Each hostile run changes only its own exercises and scores nothing on its attacked item's hidden test; a calm
    run after them all is the calm run before. Every case of tests/hostile: the channels between runs each through
    run_autograder, as Gradescope runs an upload; the rest through its Python entry, two interpreters at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from grader.grading.traps import TRAPS  # a trap's id is in students' JSON, not in Gradescope's results

    reference = {f"ex{k}.py": (ROOT / "reference" / f"ex{k}.py").read_text() for k in range(1, 5)}
    calm = _autograde(autograder_source, tmp_path / "calm", reference)
    assert calm["score"] == 42 and not [t for t in calm["tests"] if t.get("name", "").startswith("sandbox")]
    by_name = {t["name"]: t for t in calm["tests"]}

    def files(case: Path) -> dict[str, str]:
        out = dict(reference)
        for ex, part in parts(case.read_text()):
            out[f"{ex}.py"] = out[f"{ex}.py"] + "\n\n" + part
        return out

    def check(case: Path, got: dict) -> list[str]:
        _, item_id, status, (kind, text) = hostile_expectation(case)
        wrong = [
            f"{case.stem}: {test['name']} changed"
            for test in got["tests"]
            if test["name"].split(".")[0] not in touched(case.read_text()) and test != by_name.get(test["name"])
        ]
        attacked = next(t for t in got["tests"] if t["name"] == f"{item_id} (hidden geometry)")
        if status != "any" and attacked["score"]:
            wrong.append(f"{case.stem}: {item_id} scored {attacked['score']}")
        if kind == "message" and text.strip() not in TRAPS and text.strip() not in json.dumps(got):
            wrong.append(f"{case.stem}: {text.strip()!r} not in the results")
        return wrong

    alone = [c for c in HOSTILE if c.stem in CHANNELS]
    together = [c for c in HOSTILE if c.stem not in CHANNELS]
    assert len(alone) == len(CHANNELS)
    roots = {c: _stage(tmp_path / c.stem, files(c)) for c in together}
    halves = [[roots[c] for c in together[k::2]] for k in (0, 1)]
    with ThreadPoolExecutor(2) as runs:
        single = list(runs.map(lambda c: _autograde(autograder_source, tmp_path / f"{c.stem}_alone", files(c)), alone))
        list(runs.map(lambda rs: _autograde_many(autograder_source, rs), halves))
    wrong = [w for c, got in zip(alone, single, strict=True) for w in check(c, got)]
    wrong += [w for c in together for w in check(c, _results(roots[c]))]
    assert wrong == []
    assert _autograde(autograder_source, tmp_path / "calm_again", reference) == calm
