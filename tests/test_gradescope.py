"""Gradescope glue: results.json conversion, submission discovery, the autograder zip and run_autograder."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import time
import types
import zipfile
from pathlib import Path

import pytest

from grader.ship import gradescope, release
from grader.spec import policy
from grader.spec.policy import Policy
from tests.conftest import REFERENCE, sandboxes_started
from tests.conftest import item_json as _item

ROOT = Path(__file__).resolve().parents[1]
SECRET = "the autograder's course secret"
TOP_KEYS = {
    "score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
    "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard",
}  # fmt: skip
TEST_KEYS = {
    "score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
    "visibility", "extra_data",
}  # fmt: skip


def _result(items):
    """Return a hand-made SubmissionResult.to_dict()."""
    return {
        "submission": "sub",
        "score": sum(i["score"] for i in items),
        "max_score": sum(i["max_score"] for i in items),
        "items": items,
    }


def _is_number(x) -> bool:
    """Tell a JSON number from a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def validate(results: dict) -> None:
    """Assert that results follows Gradescope's results.json specification."""
    assert set(results) <= TOP_KEYS, set(results) - TOP_KEYS
    assert _is_number(results["score"])
    assert isinstance(results["output"], str) and results["output"]
    assert results.get("visibility", "visible") in gradescope.VISIBILITIES
    assert results.get("stdout_visibility", "hidden") in gradescope.VISIBILITIES
    if "execution_time" in results:
        assert _is_number(results["execution_time"]) and results["execution_time"] >= 0
    assert isinstance(results["tests"], list)
    for test in results["tests"]:
        assert set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert isinstance(test["name"], str) and test["name"]
        assert isinstance(test["number"], str)
        assert _is_number(test["score"]) and _is_number(test["max_score"])
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert isinstance(test["output"], str)
        assert test.get("visibility", "visible") in gradescope.VISIBILITIES
    json.dumps(results, allow_nan=False)


# ----------------------------------------------------------------------------------------------------------
# to_results


def test_to_results_two_tests_per_item():
    items = [
        _item("ex1", "dlogprobs"),
        _item("ex1", "dC", "failed", traps=["dC-repeated-rows"], message="Rows 3, 5 are wrong."),
        _item("ex2", "dlogits", "error", max_score=2.0, exact=None, approx=None, maxdiff=None, shape=None),
        _item("ex3", "dhprebn", "timeout", max_score=4.0),
        _item("ex4", "training", "not_attempted", max_score=3.0, shape=None),
    ]
    out = gradescope.to_results(_result(items), execution_time=3.14159)
    validate(out)
    assert [t["name"] for t in out["tests"]] == [
        "ex1.dlogprobs",
        "ex1.dlogprobs (hidden geometry)",
        "ex1.dC",
        "ex1.dC (hidden geometry)",
        "ex2.dlogits",
        "ex2.dlogits (hidden geometry)",
        "ex3.dhprebn",
        "ex3.dhprebn (hidden geometry)",
        "ex4.training",
        "ex4.training (hidden geometry)",  # the training steps run on both geometries too
    ]
    assert [t["number"] for t in out["tests"]] == [
        "1.1",
        "1.1.1",
        "1.2",
        "1.2.1",
        "2.1",
        "2.1.1",
        "3.1",
        "3.1.1",
        "4.1",
        "4.1.1",
    ]
    assert [t["status"] for t in out["tests"]] == ["passed", "passed"] + ["failed"] * 8
    assert [t["max_score"] for t in out["tests"]] == [0, 1, 0, 1, 0, 2, 0, 4, 0, 3]  # the points need both geometries
    assert [t["visibility"] for t in out["tests"]] == ["visible", "after_published"] * 5
    assert out["score"] == 1 == sum(t["score"] for t in out["tests"])
    assert out["execution_time"] == 3.14
    assert out["tests"][0]["output"].startswith("PASSED")
    dc = out["tests"][2]["output"]
    assert dc.startswith("FAILED") and "dC-repeated-rows" in dc and "Rows 3, 5 are wrong." in dc
    assert "maxdiff: 2.500e-01" in dc
    assert out["tests"][3]["output"].startswith("NOT CHECKED: ex1.dC does not pass on the lecture's sizes yet")
    assert out["tests"][4]["output"].startswith("ERROR")
    assert out["tests"][6]["output"].startswith("TIMED OUT")
    assert out["tests"][8]["output"].startswith("NOT ATTEMPTED")
    assert "ex1 on the lecture's sizes: 1 failed, 1 passed" in out["output"]
    assert "Score" not in out["output"]  # the total would give the hidden tests away before they are shown


HARDCODED = "Right on the lecture's fixture, but its values are wrong on a second batch with other sizes."


def test_the_hidden_geometry_stays_out_of_the_visible_test():
    item = _item(
        "ex1",
        "dhpreact",
        "failed",
        traps=["hardcoded-size"],
        message=f"{HARDCODED} Also: a note.",
        hidden_geometry={"status": "failed", "message": HARDCODED},
    )
    visible, hidden = gradescope.to_results(_result([item]), hidden_visibility="after_published")["tests"]
    assert visible["status"] == "passed" and visible["visibility"] == "visible"
    assert "hardcoded" not in visible["output"] and "second batch" not in visible["output"]
    assert "Also: a note." in visible["output"]
    assert hidden["status"] == "failed" and hidden["visibility"] == "after_published"
    assert hidden["output"] == f"FAILED: ex1.dhpreact on the hidden geometry  (0/1)\n{HARDCODED}"
    # an item that also fails for a reason of its own fails on the lecture geometry too
    item["traps"] = ["mutates-input", "hardcoded-size"]
    visible, _ = gradescope.to_results(_result([item]))["tests"]
    assert visible["status"] == "failed" and visible["output"].startswith("FAILED")
    # without the runner's verdict, the trap alone tells where the item failed
    del item["hidden_geometry"]
    item["traps"] = ["hardcoded-size"]
    visible, hidden = gradescope.to_results(_result([item]))["tests"]
    assert (visible["status"], hidden["status"]) == ("passed", "failed")


def test_to_results_shows_the_score_when_the_hidden_tests_are_visible():
    out = gradescope.to_results(_result([_item("ex2", "dlogits", max_score=2.0)]), hidden_visibility="visible")
    assert out["output"].startswith("Score: 2 / 2\nex2: 2 / 2 (1 passed on the lecture's sizes)")


def test_to_results_shape_mismatch_and_odd_numbers():
    item = _item("ex1", "db2", "failed", shape=[1, 27], expected_shape=[27], maxdiff=float("nan"))
    item["score"] = float("inf")  # never let a non-finite number into the JSON
    out = gradescope.to_results(_result([item]))
    validate(out)
    assert "shape: [1, 27] but expected [27]" in out["tests"][0]["output"]
    assert "execution_time" not in out


@pytest.mark.parametrize("visibility", gradescope.VISIBILITIES)
def test_to_results_visibility(visibility):
    out = gradescope.to_results(_result([_item("ex2", "dlogits")]), visibility=visibility, hidden_visibility=visibility)
    validate(out)
    assert out["visibility"] == visibility
    assert [t["visibility"] for t in out["tests"]] == [visibility, visibility]


def test_to_results_rejects_unknown_visibility():
    with pytest.raises(ValueError, match="visibility"):
        gradescope.to_results(_result([]), visibility="public")
    with pytest.raises(ValueError, match="visibility"):
        gradescope.to_results(_result([]), hidden_visibility="later")


def test_to_results_empty():
    out = gradescope.to_results(_result([]))
    validate(out)
    assert out["tests"] == [] and out["score"] == 0


# ----------------------------------------------------------------------------------------------------------
# finding the student's files


# ----------------------------------------------------------------------------------------------------------
# run() with a stand-in runner


def _fake_runner(monkeypatch, grade):
    """Install a stand-in grader.grading.runner module whose grade() is the given function."""
    module = types.ModuleType("grader.grading.runner")
    module.grade = grade
    module.one_student_process = contextlib.nullcontext  # no sandbox to fork: grade() is the stand-in
    monkeypatch.setitem(sys.modules, "grader.grading.runner", module)
    import grader.grading

    monkeypatch.setattr(grader.grading, "runner", module, raising=False)


def test_run_grades_the_staged_files(tmp_path, monkeypatch):
    seen = {}

    def grade(submission, exercises, **kwargs):
        seen["files"] = {ex: src.label for ex, src in submission.sources.items()}
        seen["exercises"] = exercises
        seen["kwargs"] = kwargs
        item = _item("ex2", "dlogits", message=f"checked {submission.sources['ex2'].path}")
        return _result([item])

    _fake_runner(monkeypatch, grade)
    (tmp_path / "submission" / "nested").mkdir(parents=True)
    (tmp_path / "submission" / "nested" / "ex2.py").write_text("pass\n")
    course = Policy(level="hint", secret="a long enough course secret", hidden_visibility="hidden")
    out = gradescope.run(tmp_path, visibility="after_published", policy=course)
    kwargs = seen.pop("kwargs")
    assert kwargs == {"policy": course, "level": "hint"}
    assert seen == {"files": {"ex2": "nested/ex2.py"}, "exercises": ["ex1", "ex2", "ex3", "ex4"]}
    assert [t["visibility"] for t in out["tests"]] == ["after_published", "hidden"]
    written = json.loads((tmp_path / "results" / "results.json").read_text())
    assert written == out
    validate(written)
    assert written["visibility"] == "after_published"
    assert "ex2: graded nested/ex2.py" in written["output"]
    assert "checked nested/ex2.py" in written["tests"][0]["output"]
    assert str(tmp_path) not in json.dumps(written)  # no private paths


def test_run_writes_results_even_when_grading_raises(tmp_path, monkeypatch):
    def grade(submission, exercises, **kwargs):
        raise RuntimeError("fixture exploded")

    _fake_runner(monkeypatch, grade)
    out = gradescope.run(tmp_path)
    written = json.loads((tmp_path / "results" / "results.json").read_text())
    assert written == out
    validate(written)
    assert written["score"] == 0 and written["tests"] == []
    assert "RuntimeError: fixture exploded" in written["output"]


# ----------------------------------------------------------------------------------------------------------
# the autograder zip and run_autograder, end to end


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """Build the zip once and unzip it (keeping the mode bits) like Gradescope does."""
    base = tmp_path_factory.mktemp("gradescope")
    course = Policy(points={"ex2.dlogits": 5}, level="hint", secret=SECRET, hidden_visibility="after_published")
    out = gradescope.build_autograder_zip(base / "autograder.zip", ROOT, visibility="after_due_date", policy=course)
    source = base / "source"
    with zipfile.ZipFile(out) as zf:
        for info in zf.infolist():
            zf.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(source / info.filename, mode)
    return out, source


def test_zip_layout(autograder):
    out, source = autograder
    with zipfile.ZipFile(out) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    for name in ("setup.sh", "run_autograder"):
        mode = infos[name].external_attr >> 16
        assert stat.S_ISREG(mode) and mode & 0o111 == 0o111, name
    assert "pyproject.toml" in infos and "README.md" in infos and "grader/gradescope.py" in infos
    assert "grader/grading/runner.py" in infos
    tops = {name.split("/")[0] for name in infos}
    assert not tops & {"reference", "tests", "bench", "exercises"}
    assert not [n for n in infos if "__pycache__" in n or n.endswith(".pyc")]
    run_script = infos["run_autograder"]
    text = zipfile.ZipFile(out).read(run_script).decode()
    assert text.startswith("#!") and '--course "$SOURCE/course.toml"' in text and "AUTOGRADER_ROOT" in text
    assert '"visibility": "after_due_date"' in text  # the failed-to-start fallback
    assert "python3 -m grader.ship.gradescope" in text.replace('"${PYTHON:-python3}"', "python3")
    for name in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(source / name)], check=True)
    setup = (source / "setup.sh").read_text()
    pin = f'"torch=={release.TORCH_VERSION}"'
    assert f"--index-url https://download.pytorch.org/whl/cpu {pin} \\\n    || python3 -m pip install {pin}\n" in setup
    assert f"pip install torch=={release.TORCH_VERSION} " in (ROOT / "README.md").read_text()  # what the tests use
    course = policy.load(source / "course.toml")  # the whole policy, secret included: the zip is for staff
    assert (course.secret, course.level, course.points) == (SECRET, "hint", {"ex2.dlogits": 5})
    assert (course.visibility, course.hidden_visibility) == ("after_due_date", "after_published")


def test_zip_without_a_secret_gets_one(tmp_path):
    drawn = []
    for name in ("a", "b"):
        with zipfile.ZipFile(gradescope.build_autograder_zip(tmp_path / f"{name}.zip", ROOT)) as zf:
            (tmp_path / f"{name}.toml").write_bytes(zf.read("course.toml"))
        drawn.append(policy.load(tmp_path / f"{name}.toml").secret)
    assert all(s and len(s) >= 24 for s in drawn) and drawn[0] != drawn[1]


def test_a_broken_course_toml_still_writes_results(tmp_path):
    root = _fake_root(tmp_path, {})
    (tmp_path / "course.toml").write_text('level = "everything"\n')
    out = gradescope.main(["--root", str(root), "--course", str(tmp_path / "course.toml")])
    validate(out)
    assert "misconfigured" in out["output"] and "level = 'everything'" in out["output"]
    assert json.loads((root / "results" / "results.json").read_text()) == out


def _run_autograder(source: Path, root: Path) -> dict:
    """Run the unzipped run_autograder against a fake /autograder tree and return its results.json."""
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_SOURCE=str(source), PYTHONPATH=str(source))
    env["PYTHON"] = sys.executable
    proc = subprocess.run(
        ["bash", str(source / "run_autograder")],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    where = subprocess.run(
        [sys.executable, "-c", "import grader.ship.gradescope as g; print(g.__file__)"],
        cwd=source, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(source)  # the zipped grader, not an installed one
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    return results


def _fake_root(tmp_path: Path, files: dict[str, str]) -> Path:
    """Lay out root/submission (with files) and an empty root/results."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    for rel, text in files.items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / rel).write_text(text)
    return root


@pytest.mark.slow
def test_run_autograder_stub_submission(autograder, tmp_path):
    _, source = autograder
    root = _fake_root(tmp_path, {"ex2.py": (ROOT / "exercises" / "ex2.py").read_text()})
    results = _run_autograder(source, root)
    assert results["score"] == 0
    assert results["visibility"] == "after_due_date"
    names = [t["name"] for t in results["tests"]]
    assert "ex1.dC" in names and "ex2.dlogits" in names
    assert all(t["status"] == "failed" for t in results["tests"])
    ex2 = next(t for t in results["tests"] if t["name"] == "ex2.dlogits")
    assert ex2["output"].startswith("NOT ATTEMPTED")


@pytest.mark.slow
def test_run_autograder_correct_ex2(autograder, tmp_path):
    reference = ROOT / "reference" / "ex2.py"
    if not reference.exists():
        pytest.skip("no reference/ex2.py")
    _, source = autograder
    root = _fake_root(tmp_path, {"my work/ex2.py": reference.read_text()})
    results = _run_autograder(source, root)
    ex2 = [(t["name"], t["status"], t["score"], t["max_score"], t["visibility"]) for t in results["tests"]]
    ex2 = [t for t in ex2 if t[0].startswith("ex2.")]
    assert ex2 == [  # the zip's course.toml: 5 points, hidden tests after publishing, the summary after the due date
        ("ex2.dlogits", "passed", 0, 0, "after_due_date"),
        ("ex2.dlogits (hidden geometry)", "passed", 5, 5, "after_published"),
    ]
    assert results["score"] == 5 and results["visibility"] == "after_due_date"


@pytest.mark.slow
def test_hard_coded_sizes_show_only_after_the_hidden_tests_do(tmp_path):
    hard_coded = (ROOT / "reference" / "ex2.py").read_text().replace("d /= n", "d /= 32")
    assert hard_coded != (ROOT / "reference" / "ex2.py").read_text()
    root = _fake_root(tmp_path, {"ex2.py": hard_coded})
    course = Policy(points={"ex2.dlogits": 5}, level="full", secret=SECRET)
    results = gradescope.run(root, policy=course)
    visible, hidden = (t for t in results["tests"] if t["name"].startswith("ex2."))
    assert (visible["status"], visible["visibility"]) == ("passed", "visible")
    assert "hardcoded-size" not in visible["output"] and "second" not in visible["output"]
    assert (hidden["status"], hidden["score"], hidden["visibility"]) == ("failed", 0, "after_published")
    assert "other sizes" in hidden["output"]
    assert results["score"] == 0


@pytest.mark.slow
def test_a_child_restarted_after_a_crash_is_forked_by_the_zygote_too(tmp_path, monkeypatch):
    """One student per process, judged as it goes: no sandbox, not even a restart, is a fork of this process."""
    started = sandboxes_started(monkeypatch)
    crash = (ROOT / "reference" / "ex1.py").read_text() + "\n\ndef dh(dlogits, W2):\n    torch.os._exit(3)\n"
    results = gradescope.run(_fake_root(tmp_path, {"ex1.py": crash}), policy=Policy(secret=SECRET))
    tests = {t["name"]: t for t in results["tests"]}
    assert tests["ex1.dh"]["status"] == "failed" and "exited with code 3" in tests["ex1.dh"]["output"]
    after = tests["ex1.dW2 (hidden geometry)"]  # the call after the crash, in a new child
    assert after["score"] == after["max_score"] == 1
    assert len(started) >= 3 and all(started), started  # the reading, then two children at least


@pytest.mark.slow
@pytest.mark.parametrize(
    "files",
    [
        {"ex2.py": "def dlogits(logits, Yb, n)\n    return logits\n"},  # syntax error
        {},  # empty submission
        {"notes.txt": "I ran out of time"},
    ],
    ids=["syntax-error", "empty", "no-exercise-files"],
)
def test_run_autograder_broken_submission(autograder, tmp_path, files):
    _, source = autograder
    root = _fake_root(tmp_path, files)
    results = _run_autograder(source, root)
    assert results["score"] == 0
    assert all(t["score"] == 0 for t in results["tests"])


def test_run_autograder_without_python_still_writes_results(autograder, tmp_path):
    _, source = autograder
    root = _fake_root(tmp_path, {})
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=str(tmp_path / "no-such-python"))
    proc = subprocess.run(["bash", str(source / "run_autograder")], cwd=source, env=env, capture_output=True)
    assert proc.returncode == 0
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    assert results["score"] == 0 and "failed to start" in results["output"]
    assert results["visibility"] == "after_due_date"


def test_run_reads_an_uploaded_zip_with_the_batch_intake(tmp_path, monkeypatch):
    seen = {}

    def grade(submission, exercises, **kwargs):
        seen.update({ex: src.label for ex, src in submission.sources.items()})
        return _result([_item("ex2", "dlogits")])

    _fake_runner(monkeypatch, grade)
    (tmp_path / "submission").mkdir()
    with zipfile.ZipFile(tmp_path / "submission" / "upload.zip", "w") as zf:
        zf.writestr("hw/ex2.py", (REFERENCE / "ex2.py").read_text())
        zf.writestr("../evil.py", "no")
    out = gradescope.run(tmp_path)
    assert list(seen) == ["ex2"] and "hw/ex2.py" in seen["ex2"]
    assert "ex2: graded upload.zip/hw/ex2.py" in out["output"]
    assert not (tmp_path / "evil.py").exists()


def test_run_writes_results_when_grading_overruns_its_overall_limit(tmp_path, monkeypatch):
    from grader.classroom import deadline

    def grade(submission, exercises, **kwargs):
        time.sleep(30)  # the grader's own reading of a hostile file, say: no call deadline covers it

    _fake_runner(monkeypatch, grade)
    monkeypatch.setattr(deadline, "per_submission", lambda timeout: 0.5)
    started = time.monotonic()
    out = gradescope.run(tmp_path)
    assert time.monotonic() - started < 10
    validate(out)
    assert out["score"] == 0 and "took longer than 0.5 s and was stopped" in out["output"]
    assert json.loads((tmp_path / "results" / "results.json").read_text()) == out
