"""PrairieLearn glue: results.json against PrairieLearn's documented schema, a fake /grade tree, the course files.

The schema is PrairieLearn's docs/externalGrading.md, section "Grading results" (with "The Grading Process" for the
/grade layout): `score` a number in [0.0, 1.0], required when the submission is gradable; `gradable` a boolean
(absent means true); `format_errors`, when gradable is false, a string or an array of strings; `message`, `output`;
`images`, each an object with `url` and an optional `label`, or a string; `tests`, each with `name`, `description`,
`points`, `max_points`, `message`, `output` and `images`; the file limited to 1 MB; /grade/results not created for
us. pl-external-grader-results drops every test's points when one test lacks `points` or `max_points`, so both
are required here.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.ship import prairielearn
from grader.spec import policy
from grader.spec.policy import Policy
from tests.conftest import REFERENCE, sandboxes_started
from tests.conftest import item_json as _item

ROOT = Path(__file__).resolve().parents[1]
SECRET = "the PrairieLearn course secret"
TOP_KEYS = {"gradable", "score", "format_errors", "message", "output", "images", "tests"}
TEST_KEYS = {"name", "description", "points", "max_points", "message", "output", "images"}
LIMIT = 1_000_000  # "this file should be limited to 1 MB"


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _images(images) -> None:
    assert isinstance(images, list)
    for image in images:
        if isinstance(image, str):  # "the object may be replaced with a string containing only the URL"
            continue
        assert isinstance(image, dict) and set(image) <= {"url", "label"} and isinstance(image["url"], str)
        assert isinstance(image.get("label", ""), str)


def validate(results: dict) -> None:
    """Assert that results follows PrairieLearn's documented results.json (docs/externalGrading.md)."""
    assert isinstance(results, dict)
    assert set(results) <= TOP_KEYS, set(results) - TOP_KEYS
    gradable = results.get("gradable", True)
    assert isinstance(gradable, bool)
    if gradable:
        assert "score" in results, "a gradable result must have a score"
        assert "format_errors" not in results, "format_errors go with gradable: false"
    if "score" in results:
        assert _is_number(results["score"]) and 0.0 <= results["score"] <= 1.0
    if "format_errors" in results:
        errors = results["format_errors"]
        assert isinstance(errors, str) or (isinstance(errors, list) and all(isinstance(e, str) for e in errors))
    for key in ("message", "output"):
        assert isinstance(results.get(key, ""), str), key
    if "images" in results:
        _images(results["images"])
    tests = results.get("tests", [])
    assert isinstance(tests, list)
    for test in tests:
        assert isinstance(test, dict) and set(test) <= TEST_KEYS, set(test) - TEST_KEYS
        assert isinstance(test.get("name"), str) and test["name"]
        assert _is_number(test.get("points")) and _is_number(test.get("max_points")), "points and max_points"
        assert 0 <= test["points"] <= test["max_points"]
        for key in ("description", "message", "output"):
            assert isinstance(test.get(key, ""), str), key
        if "images" in test:
            _images(test["images"])
    if gradable and tests:  # ours: the score is the points the tests give
        got, out_of = sum(t["points"] for t in tests), sum(t["max_points"] for t in tests)
        assert results["score"] == pytest.approx(got / out_of if out_of else 0.0)
    assert len(json.dumps(results, allow_nan=False).encode()) <= LIMIT


def _result(items):
    return {
        "submission": "submission",
        "score": sum(i["score"] for i in items),
        "max_score": sum(i["max_score"] for i in items),
        "items": items,
    }


# ----------------------------------------------------------------------------------------------------------
# to_results


def test_the_validator_refuses_what_the_doc_does_not_allow():
    validate({"score": 0.5})  # the one mandatory field
    validate({"gradable": False, "format_errors": "no file"})  # not gradable: no score needed
    for bad in (
        {},  # gradable and no score
        {"score": 1.5},
        {"score": True},
        {"gradable": "no", "score": 0},
        {"score": 0, "format_errors": ["only when not gradable"]},
        {"score": 0, "tests": [{"name": "t", "points": 1}]},  # max_points missing
        {"score": 0, "tests": [{"name": "t", "points": 1, "max_points": 1, "visibility": "hidden"}]},
    ):
        with pytest.raises(AssertionError):
            validate(bad)


def test_two_tests_per_item_and_the_score_as_a_fraction():
    items = [
        _item("ex1", "dlogprobs"),
        _item("ex1", "dC", "failed", traps=["dC-repeated-rows"], message="Rows 3, 5 are wrong."),
        _item("ex2", "dlogits", "error", max_score=2.0, exact=None, approx=None, maxdiff=None, shape=None),
        _item("ex4", "training", "not_attempted", max_score=3.0, shape=None),
    ]
    out = prairielearn.to_results(_result(items), note="ex1: graded ex1.py")
    validate(out)
    assert out["gradable"] is True and out["score"] == pytest.approx(1 / 7)
    assert [t["name"] for t in out["tests"]] == [
        "ex1.dlogprobs",
        "ex1.dlogprobs (hidden geometry)",
        "ex1.dC",
        "ex1.dC (hidden geometry)",
        "ex2.dlogits",
        "ex2.dlogits (hidden geometry)",
        "ex4.training",
        "ex4.training (hidden geometry)",
    ]
    assert [(t["points"], t["max_points"]) for t in out["tests"]] == [(0, 0), (1, 1), (0, 0), (0, 1)] + [
        (0, 0),
        (0, 2),
        (0, 0),
        (0, 3),
    ]  # the lecture-geometry verdicts are 0/0: pl-external-grader-results shows them as information
    dc = out["tests"][2]
    assert dc["message"] == "Rows 3, 5 are wrong." and dc["output"].startswith("FAILED: ex1.dC  (0/0)")
    assert "dC-repeated-rows" in dc["output"] and "maxdiff: 2.500e-01" in dc["output"]
    assert out["tests"][3]["output"].startswith("NOT CHECKED: ex1.dC does not pass on the lecture's sizes yet")
    assert out["tests"][4]["output"].startswith("ERROR") and out["tests"][6]["output"].startswith("NOT ATTEMPTED")
    assert out["message"].startswith("Score: 1 / 7\nex1: 1 / 2 (1 failed, 1 passed on the lecture's sizes)")
    assert out["output"] == "ex1: graded ex1.py"


HARDCODED = "Right on the lecture's fixture, but its values are wrong on a second batch with other sizes."


def test_the_hidden_geometry_has_its_own_test():
    item = _item(
        "ex1",
        "dhpreact",
        "failed",
        traps=["hardcoded-size"],
        message=f"{HARDCODED} Also: a note.",
        hidden_geometry={"status": "failed", "message": HARDCODED},
    )
    lecture, hidden = prairielearn.to_results(_result([item]))["tests"]
    assert lecture["output"].startswith("PASSED") and "hardcoded" not in lecture["output"]
    assert lecture["message"] == "" and (lecture["points"], lecture["max_points"]) == (0, 0)
    assert (hidden["points"], hidden["max_points"]) == (0, 1)
    assert hidden["output"] == "FAILED: ex1.dhpreact on the hidden geometry  (0/1)" and hidden["message"] == HARDCODED


def test_flags_the_table_shows_are_in_the_output():
    result = _result([_item("ex2", "dlogits")])
    result["flags"] = {"private_internals": [{"exercise": "ex2", "line": 3, "what": "interpreter internals .sys"}]}
    out = prairielearn.to_results(result, note="ex2: graded ex2.py")
    assert out["output"].startswith("ex2: graded ex2.py\n\nflagged for your instructor (no points change)")
    assert "ex2.py line 3: interpreter internals .sys" in out["output"]


def test_non_finite_numbers_never_reach_the_json():
    item = _item("ex1", "db2", "failed", maxdiff=float("nan"), shape=[1, 27], expected_shape=[27])
    item["max_score"] = float("inf")
    out = prairielearn.to_results(_result([item]))
    validate(out)
    assert out["score"] == 0.0 and "shape: [1, 27] but expected [27]" in out["tests"][0]["output"]


def test_an_oversized_result_is_cut_to_one_megabyte():
    items = [_item("ex1", f"d{k}", "error", message="x" * 50_000) for k in range(40)]
    out = prairielearn._fit(prairielearn.to_results(_result(items)))
    validate(out)
    assert "[... cut: results.json must stay under 1 MB]" in out["tests"][0]["message"]


# ----------------------------------------------------------------------------------------------------------
# run() on a fake /grade tree


def _grade_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """Lay out a /grade tree as PrairieLearn's buildDirectory does: data/, serverFilesCourse/, student/, tests/."""
    root = tmp_path / "grade"
    for sub in ("data", "serverFilesCourse", "student", "tests"):
        (root / sub).mkdir(parents=True)
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}, "gradable": True}))
    for rel, text in files.items():
        (root / "student" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "student" / rel).write_text(text)
    return root  # no results/: PrairieLearn does not create it


def _written(root: Path) -> dict:
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    return results


def test_the_reference_scores_one(tmp_path):
    files = {f"{ex}.py": (REFERENCE / f"{ex}.py").read_text() for ex in prairielearn.EXERCISES}
    root = _grade_tree(tmp_path, files)
    out = prairielearn.run(root, policy=Policy(secret=SECRET, level="hint"))
    assert _written(root) == out
    assert out["gradable"] is True and out["score"] == 1.0
    assert len(out["tests"]) == 2 * 36 and all(t["points"] == t["max_points"] for t in out["tests"])
    assert out["output"].startswith("ex1: graded ex1.py")
    assert str(root) not in json.dumps(out)  # no private paths


def test_a_broken_file_scores_zero_for_its_exercise_only(tmp_path):
    files = {"ex2.py": "def dlogits(logits, Yb, n)\n    return logits\n", "ex3.py": (REFERENCE / "ex3.py").read_text()}
    root = _grade_tree(tmp_path, files)
    out = prairielearn.run(root, policy=Policy(secret=SECRET))
    assert _written(root) == out
    assert out["gradable"] is True and out["score"] == pytest.approx(4 / 42)
    ex2 = next(t for t in out["tests"] if t["name"] == "ex2.dlogits")
    assert ex2["output"].startswith("ERROR") and "SyntaxError" in ex2["message"]
    assert "Not found: ex1, ex4." in out["output"]


@pytest.mark.slow
def test_a_child_restarted_after_a_crash_is_forked_by_the_zygote_too(tmp_path, monkeypatch):
    """As on Gradescope: no sandbox of this one-student process, not even a restart, is a fork of it."""
    started = sandboxes_started(monkeypatch)
    crash = (REFERENCE / "ex1.py").read_text() + "\n\ndef dh(dlogits, W2):\n    torch.os._exit(3)\n"
    out = prairielearn.run(_grade_tree(tmp_path, {"ex1.py": crash}), policy=Policy(secret=SECRET), exercises=["ex1"])
    tests = {t["name"]: t for t in out["tests"]}
    assert "exited with code 3" in tests["ex1.dh"]["message"] and tests["ex1.dh (hidden geometry)"]["points"] == 0
    after = tests["ex1.dW2 (hidden geometry)"]  # the call after the crash, in a new child
    assert after["points"] == after["max_points"] == 1
    assert len(started) >= 3 and all(started), started  # the reading, then two children at least


def test_nothing_to_grade_is_not_gradable(tmp_path):
    root = _grade_tree(tmp_path, {"notes.txt": "I ran out of time"})
    out = prairielearn.run(root)
    assert _written(root) == out
    assert out["gradable"] is False and out["tests"] == []
    assert out["format_errors"] == [prairielearn.NOTHING.format(names="ex1.py, ex2.py, ex3.py, ex4.py")]
    empty = _grade_tree(tmp_path / "empty", {})
    assert prairielearn.run(empty, exercises=["ex2"])["format_errors"][0].startswith(
        "No exercise files were found in your submission: upload ex2.py ("
    )


def test_one_exercise_per_question(tmp_path):
    root = _grade_tree(tmp_path, {"hw/ex2.py": (REFERENCE / "ex2.py").read_text()})
    out = prairielearn.main(["--root", str(root), "--exercise", "ex2"])
    assert _written(root) == out
    assert out["score"] == 1.0 and [t["name"] for t in out["tests"]] == ["ex2.dlogits", "ex2.dlogits (hidden geometry)"]
    assert out["output"] == "ex2: graded hw/ex2.py"


def _fake_runner(monkeypatch, grade):
    module = types.ModuleType("grader.grading.runner")
    module.grade = grade
    module.one_student_process = contextlib.nullcontext  # no sandbox to fork: grade() is the stand-in
    monkeypatch.setitem(sys.modules, "grader.grading.runner", module)
    import grader.grading

    monkeypatch.setattr(grader.grading, "runner", module, raising=False)


def test_a_grader_error_is_not_gradable(tmp_path, monkeypatch):
    def grade(submission, exercises, **kwargs):
        raise RuntimeError("fixture exploded")

    _fake_runner(monkeypatch, grade)
    root = _grade_tree(tmp_path, {"ex2.py": "pass\n"})
    out = prairielearn.run(root)
    assert _written(root) == out
    assert out["gradable"] is False and "internal error" in out["message"]
    assert "RuntimeError: fixture exploded" in out["output"]


def test_an_overrun_is_not_gradable(tmp_path, monkeypatch):
    def grade(submission, exercises, **kwargs):
        time.sleep(30)

    _fake_runner(monkeypatch, grade)
    root = _grade_tree(tmp_path, {"ex2.py": "pass\n"})
    started = time.monotonic()
    out = prairielearn.run(root, deadline=0.5)
    assert time.monotonic() - started < 10
    assert _written(root) == out
    assert out["gradable"] is False and "took longer than 0.5 s and was stopped" in out["message"]


def test_no_student_code_runs_without_the_sandbox_walls(tmp_path, monkeypatch):
    import grader.sandbox

    def grade(submission, exercises, **kwargs):
        raise AssertionError("student code must not run")

    _fake_runner(monkeypatch, grade)
    walls = types.SimpleNamespace(missing_minimum=lambda: ["the system-call allow-list (no libseccomp)"])
    monkeypatch.setattr(grader.sandbox, "protections", lambda: walls)
    root = _grade_tree(tmp_path, {"ex2.py": "pass\n"})
    out = prairielearn.run(root)
    assert _written(root) == out
    assert out["gradable"] is False and out["message"] == prairielearn.NO_SANDBOX
    assert "no libseccomp" in out["output"]
    _fake_runner(monkeypatch, lambda *a, **k: _result([_item("ex2", "dlogits")]))
    assert prairielearn.run(root, unsafe=True)["score"] == 1.0  # --unsafe grades anyway


def test_a_broken_course_toml_is_not_gradable(tmp_path):
    root = _grade_tree(tmp_path, {})
    (tmp_path / "course.toml").write_text('level = "everything"\n')
    out = prairielearn.main(["--root", str(root), "--course", str(tmp_path / "course.toml")])
    assert _written(root) == out
    assert out["gradable"] is False and "misconfigured" in out["message"] and "everything" in out["output"]


# ----------------------------------------------------------------------------------------------------------
# the course files and run.sh


@pytest.fixture(scope="module")
def course_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("pl") / "course"
    course = Policy(points={"ex2.dlogits": 5}, level="hint", secret=SECRET)
    prairielearn.build_course_files(out, ROOT, policy=course, deadline=50)
    return out


def test_course_files_layout(course_files):
    folder = course_files / "serverFilesCourse" / prairielearn.FOLDER
    run_sh = folder / "run.sh"
    assert run_sh.stat().st_mode & 0o111 == 0o111
    subprocess.run(["bash", "-n", str(run_sh)], check=True)
    text = run_sh.read_text()
    assert "-m grader.ship.prairielearn" in text and "--deadline 50" in text and 'cd "$HERE"' in text
    assert (folder / "grader" / "ship" / "prairielearn.py").is_file() and (folder / "pyproject.toml").is_file()
    tops = {p.relative_to(folder).parts[0] for p in folder.rglob("*")}
    assert not tops & {"reference", "tests", "bench", "exercises"}
    assert not list(folder.rglob("__pycache__"))
    course = policy.load(folder / "course.toml")  # the whole policy: serverFilesCourse never reaches students
    assert (course.secret, course.level, course.points) == (SECRET, "hint", {"ex2.dlogits": 5})
    note = (course_files / "PRAIRIELEARN.md").read_text()
    assert '"entrypoint": "/grade/serverFilesCourse/backprop_ninja/run.sh"' in note
    assert '"image": "REPLACE-WITH-THE-IMAGE-YOU-BUILT"' in note and "No Docker image was built" in note
    assert "50 s" in note
    with pytest.raises(FileExistsError):
        prairielearn.build_course_files(course_files, ROOT)


def test_course_files_without_a_secret_get_one(tmp_path):
    drawn = []
    for name in ("a", "b"):
        prairielearn.build_course_files(tmp_path / name, ROOT)
        drawn.append(policy.load(tmp_path / name / "serverFilesCourse" / "backprop_ninja" / "course.toml").secret)
    assert all(s and len(s) >= 24 for s in drawn) and drawn[0] != drawn[1]


def _run_sh(course_files: Path, root: Path, *args: str, python: str = sys.executable) -> dict:
    """Run run.sh as PrairieLearn would, from inside the student's folder, and return results.json."""
    folder = course_files / "serverFilesCourse" / prairielearn.FOLDER
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(GRADE_ROOT=str(root), PYTHON=python)
    proc = subprocess.run(
        ["bash", str(folder / "run.sh"), *args],
        cwd=root / "student",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return _written(root)


def test_run_sh_grades_with_its_own_grader_and_policy(course_files, tmp_path):
    files = {"ex2.py": (REFERENCE / "ex2.py").read_text()}
    files["grader/__init__.py"] = "raise SystemExit('the student grader package was imported')\n"
    files["grader/ship/__init__.py"] = ""
    files["grader/ship/prairielearn.py"] = "raise SystemExit('the student grader package was imported')\n"
    root = _grade_tree(tmp_path, files)
    wrapper, log = tmp_path / "python", tmp_path / "which-grader"
    wrapper.write_text(  # in run.sh's own environment: which grader would `python -m` import?
        f'#!/usr/bin/env bash\n"{sys.executable}" -c "import grader; print(grader.__file__)" > "{log}"\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(0o755)
    out = _run_sh(course_files, root, "--exercise", "ex2", python=str(wrapper))
    assert Path(log.read_text().strip()).is_relative_to(course_files)  # the course's copy, never the student's
    hidden = next(t for t in out["tests"] if t["name"] == "ex2.dlogits (hidden geometry)")
    assert (out["score"], hidden["points"], hidden["max_points"]) == (1.0, 5, 5)  # course.toml's points
    (root / "tests" / "course.toml").write_text('[points]\n"ex2.dlogits" = 7\n')  # a question's own policy wins
    out = _run_sh(course_files, root, "--exercise", "ex2")
    assert [t["max_points"] for t in out["tests"]] == [0, 7]


def test_run_sh_without_python_still_writes_results(course_files, tmp_path):
    root = _grade_tree(tmp_path, {})
    out = _run_sh(course_files, root, python=str(tmp_path / "no-such-python"))
    assert out["gradable"] is False and "failed to start" in out["message"]


def test_the_grade_prairielearn_command(tmp_path):
    from grader.cli.main import main

    (tmp_path / "course.toml").write_text(f'secret = "{SECRET}"\nlevel = "hint"\n')
    runner = CliRunner()
    out = tmp_path / "pl"
    result = runner.invoke(main, ["prairielearn", str(out), "--course", str(tmp_path / "course.toml"), "--unsafe"])
    assert result.exit_code == 0, result.output
    folder = out / "serverFilesCourse" / "backprop_ninja"
    assert policy.load(folder / "course.toml").secret == SECRET
    assert "--unsafe" in (folder / "run.sh").read_text()
    again = runner.invoke(main, ["prairielearn", str(out)])
    assert again.exit_code != 0 and "not empty" in again.output
