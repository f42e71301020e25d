"""`grade batch`: a folder of correct, wrong, broken and hostile submissions, graded in parallel."""

from __future__ import annotations

import csv
import json
import os
import zipfile
from pathlib import Path

import pytest

from grader.classroom.batch import GRADEBOOK_COLUMNS, grade_batch
from grader.sandbox import Limits
from tests.conftest import CORPUS, EXERCISES, REFERENCE, make_submission
from tests.hostile_files import EXPECT, HOSTILE, parts, touched
from tests.hostile_files import expectation as hostile_expectation

LIMITS = Limits(timeout=3.0, memory_mb=1024)  # the README's --timeout


def _marker() -> str:
    """Return bob's private line, built at run time so that no constant of this module holds it."""
    return "# " + "-".join(("CALM", "STUDENT", "PRIVATE", "MARKER")) + ": residue_scan.py must never see it\n"


def _student(root: Path, name: str, exercise: str | None = None, snippet: str = "", base=REFERENCE) -> None:
    """Write a student: base's files, with snippet appended to exercise's file (a hostile case: to each of its)."""
    files = {}
    if exercise:
        pieces = parts(snippet) if EXPECT.match(snippet) else [(exercise, snippet)]
        for ex, part in pieces:
            files[f"{ex}.py"] = (base / f"{ex}.py").read_text() + "\n\n" + part
    make_submission(root / name, files, base)


ODD_FILES = {
    "odd_fifo": ("ex1", os.mkfifo),  # reading it would block forever
    "odd_directory": ("ex2", lambda p: p.mkdir()),
    "odd_device": ("ex3", lambda p: p.symlink_to("/dev/zero")),  # reading it would never end
    "odd_reference_link": ("ex3", lambda p: p.symlink_to(REFERENCE / "ex3.py")),  # the solution, by link
}


@pytest.fixture(scope="module")
def class_runs(tmp_path_factory):
    """Grade a calm class, then the same class plus every hostile submission."""
    calm = tmp_path_factory.mktemp("calm")
    _student(calm, "alice")
    _student(calm, "bob", "ex1", _marker() + (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    _student(calm, "carol", base=EXERCISES)
    (calm / "dave").mkdir()  # an empty folder: nothing attempted
    stormy = tmp_path_factory.mktemp("stormy")
    for p in calm.iterdir():
        make_submission(stormy / p.name, base=p)
    for case in HOSTILE:
        exercise = hostile_expectation(case)[0]
        _student(stormy, f"hostile_{case.stem}", exercise, case.read_text())
    for student, (exercise, make) in ODD_FILES.items():  # files that are not what their names say
        make_submission(stormy / student)
        (stormy / student / f"{exercise}.py").unlink()
        make(stormy / student / f"{exercise}.py")
    with zipfile.ZipFile(stormy / "erin.zip", "w") as zf:  # a zip with the files in a folder
        for f in REFERENCE.glob("ex*.py"):
            zf.write(f, f"erin_submission/{f.name}")
    out_calm, out_stormy = tmp_path_factory.mktemp("out_calm"), tmp_path_factory.mktemp("out_stormy")
    out_stormy_1 = tmp_path_factory.mktemp("out_stormy_jobs1")
    calm_summary = grade_batch(calm, out_calm, jobs=1, limits=LIMITS, progress=False)
    stormy_summary = grade_batch(stormy, out_stormy, jobs=2, limits=LIMITS, progress=False)
    grade_batch(stormy, out_stormy_1, jobs=1, limits=LIMITS, progress=False)
    return out_calm, calm_summary, out_stormy, stormy_summary, out_stormy_1


@pytest.mark.parametrize("jobs", [1, 2])
def test_hostile_submissions_leave_everyone_else_byte_identical(class_runs, jobs):
    out_calm, _, out_stormy_2, _, out_stormy_1 = class_runs
    out_stormy = out_stormy_2 if jobs == 2 else out_stormy_1
    for student in ("alice", "bob", "carol", "dave"):
        calm = (out_calm / "students" / f"{student}.json").read_bytes()
        assert calm == (out_stormy / "students" / f"{student}.json").read_bytes(), student
    calm_rows = {r["student"]: r for r in csv.DictReader((out_calm / "gradebook.csv").open())}
    stormy_rows = {r["student"]: r for r in csv.DictReader((out_stormy / "gradebook.csv").open())}
    assert all(stormy_rows[s] == calm_rows[s] for s in calm_rows)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("case", HOSTILE, ids=lambda p: p.stem)
def test_hostile_submission_is_contained_and_named(class_runs, case, jobs):
    out_stormy = class_runs[2] if jobs == 2 else class_runs[4]
    exercise, item_id, status, (kind, text) = hostile_expectation(case)
    result = json.loads((out_stormy / "students" / f"hostile_{case.stem}.json").read_text())
    item = next(i for i in result["items"] if i["id"] == item_id)
    if status != "any":
        assert item["status"] == status, item["message"]
    if kind == "flag":  # an instructor-visible flag, made in the parent from the source
        assert result.get("flags", {}).get(text.strip()), result.get("flags")
    else:
        assert text.strip() in item["message"] or text.strip() in item["traps"], (item["message"], item["traps"])
    others = [i for i in result["items"] if i["exercise"] not in touched(case.read_text())]
    assert all(i["status"] == "passed" for i in others), "other exercises must still be graded"


@pytest.mark.parametrize("student", sorted(ODD_FILES))
def test_odd_files_are_skipped_with_a_note_and_the_rest_is_graded(class_runs, student):
    exercise = ODD_FILES[student][0]
    result = json.loads((class_runs[2] / "students" / f"{student}.json").read_text())
    assert all(i["status"] != "passed" for i in result["items"] if i["exercise"] == exercise)
    assert all(i["status"] == "passed" for i in result["items"] if i["exercise"] != exercise)
    assert any(f"{exercise}.py" in note for note in result.get("notes", [])), result.get("notes")


def test_gradebook_and_summary(class_runs):
    out_calm, calm_summary, out_stormy, summary, _ = class_runs
    rows = list(csv.DictReader((out_calm / "gradebook.csv").open()))
    assert tuple(rows[0]) == GRADEBOOK_COLUMNS
    by = {r["student"]: r for r in rows}
    assert by["alice"]["score"] == by["alice"]["max_score"] == "42"
    assert by["bob"]["ex1"] == "25" and by["bob"]["ex2"] == "2"
    assert by["carol"]["score"] == by["dave"]["score"] == "0"
    assert calm_summary["traps"] == {"dC-repeated-rows": 1}
    assert calm_summary["items"]["ex1.dC"] == {"passed": 1, "failed": 1, "error": 0, "timeout": 0, "not_attempted": 2}
    assert "hostile_infinite_loop" in summary["timed_out"]
    assert "hostile_segfault" in summary["errored"] and "alice" not in summary["errored"]
    erin = json.loads((out_stormy / "students" / "erin.json").read_text())
    assert erin["score"] == erin["max_score"] and erin["submission"] == "erin"
    html = (out_stormy / "report.html").read_text()
    assert "<svg" in html and "dC-repeated-rows" in html


def test_same_inputs_give_identical_outputs_whatever_jobs(class_runs, tmp_path):
    out_calm, *_ = class_runs
    calm = tmp_path / "calm"
    _student(calm, "alice")
    _student(calm, "bob", "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    _student(calm, "carol", base=EXERCISES)
    (calm / "dave").mkdir()
    out = tmp_path / "out"
    grade_batch(calm, out, jobs=2, limits=LIMITS, progress=False)
    for name in ("gradebook.csv", "summary.json", "students/alice.json", "students/bob.json"):
        assert (out / name).read_bytes() == (out_calm / name).read_bytes(), name


def test_resume_skips_unchanged_students(tmp_path):
    subs = tmp_path / "subs"
    _student(subs, "alice")
    _student(subs, "bob", base=EXERCISES)
    out = tmp_path / "out"
    grade_batch(subs, out, jobs=1, limits=LIMITS, progress=False)
    stamp = (out / "students" / "alice.json").stat().st_mtime_ns
    bob_before = (out / "students" / "bob.json").read_text()
    (subs / "bob" / "ex2.py").write_text((REFERENCE / "ex2.py").read_text())
    grade_batch(subs, out, jobs=1, limits=LIMITS, resume=True, progress=False)
    assert (out / "students" / "alice.json").stat().st_mtime_ns == stamp
    assert (out / "students" / "bob.json").read_text() != bob_before


def test_resume_grades_again_a_student_whose_grading_process_failed(tmp_path, monkeypatch):
    """A grading process that died (killed, out of memory, overran) is an error row, not a result to keep."""
    from grader.classroom import batch

    subs = tmp_path / "subs"
    _student(subs, "alice")
    _student(subs, "bob")
    out = tmp_path / "out"
    real = batch.grade_one_student

    def dies_for_bob(args):
        if args[0].student == "bob":
            os._exit(9)  # as if killed: the pool retries once, then records an error
        return real(args)

    monkeypatch.setattr(batch, "grade_one_student", dies_for_bob)
    grade_batch(subs, out, jobs=1, limits=LIMITS, progress=False)
    assert json.loads((out / "students" / "bob.json").read_text())["score"] == 0
    assert "bob" not in json.loads((out / "manifest.json").read_text())
    monkeypatch.setattr(batch, "grade_one_student", real)
    stamp = (out / "students" / "alice.json").stat().st_mtime_ns
    grade_batch(subs, out, jobs=1, limits=LIMITS, resume=True, progress=False)
    assert json.loads((out / "students" / "bob.json").read_text())["score"] == 42
    assert (out / "students" / "alice.json").stat().st_mtime_ns == stamp  # alice was kept


def test_progress_without_a_terminal_logs_rate_and_eta_every_ten_seconds():
    import io

    from grader.show.table import Progress

    now = [100.0]
    out = io.StringIO()  # not a terminal
    bar = Progress(40, "grading", stream=out, clock=lambda: now[0])
    for k in range(40):
        now[0] += 1.0  # one student a second
        bar.advance(f"s{k}")
    lines = out.getvalue().splitlines()
    assert lines[0] == "grading: 1/40 s0 (1.0 per s, about 39 s left)"
    assert [ln.split()[1] for ln in lines] == ["1/40", "11/40", "21/40", "31/40", "40/40"]
    assert lines[-1] == "grading: 40/40 s39 (done in 40 s)"
