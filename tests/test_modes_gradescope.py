"""The Gradescope autograder in a default Docker container (no CAP_SYS_ADMIN) against every hostile case.

A file of its own, apart from tests/test_modes.py's four runs of `grade batch`, so that under pytest-xdist the two
long runs go to different workers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile_files import HOSTILE, parts, touched
from tests.hostile_files import expectation as hostile_expectation
from tests.test_modes import _wrap

ROOT = Path(__file__).resolve().parents[1]


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


def _autograde_many(source: Path, roots: list[Path]) -> None:
    """Grade several staged trees without CAP_SYS_ADMIN, as run_autograder's Python does, in one interpreter."""
    command = _wrap("no-cap-sys-admin", [sys.executable, "-c", _MANY, str(source / "course.toml"), *map(str, roots)])
    proc = subprocess.run(command, cwd=source, env=_env(source), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_gradescope_autograder_without_cap_sys_admin_holds_against_every_hostile_case(autograder_source, tmp_path):
    """Each hostile run changes only its own exercises and scores nothing on its attacked item's hidden test; a calm
    run after them all is the calm run before. The calm runs go through run_autograder, as Gradescope runs an upload;
    every case of tests/hostile through the Python entry it calls, several to an interpreter, two interpreters at a
    time, so a channel one run leaves open (a lock, IPC, memory, a socket, a lingering child) would reach the next."""
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

    roots = {c: _stage(tmp_path / c.stem, files(c)) for c in HOSTILE}
    halves = [[roots[c] for c in HOSTILE[k::2]] for k in (0, 1)]
    with ThreadPoolExecutor(2) as runs:
        list(runs.map(lambda rs: _autograde_many(autograder_source, rs), halves))
    wrong = [w for c in HOSTILE for w in check(c, _results(roots[c]))]
    assert wrong == []
    assert _autograde(autograder_source, tmp_path / "calm_again", reference) == calm
