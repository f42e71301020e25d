"""course.toml's [late]: a late penalty, read strictly, applied after grading and stated wherever the score is.

Canvas's download says only whether a submission is late (`_LATE` in its file names), so there the flat `penalty`
applies; Gradescope says when it was made (the export's submission_metadata.yml: `created_at`; the autograder's
submission_metadata.json: `created_at` and `assignment.due_date`), so there `per_day` applies too, up to `max`.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.classroom.reports.tables import GRADEBOOK_COLUMNS, LATE_COLUMNS
from grader.cli.main import main
from grader.ship import gradescope
from grader.spec import policy
from grader.spec.policy import LateRule, Policy, PolicyError, apply_late, late_penalty
from tests import shapes
from tests.conftest import item_json

RULE = """\
[late]
penalty = 0.1        # 10% off any late submission
per_day = 0.05       # and 5% a day, where the platform says how late
max = 0.3
due = 2026-11-01T23:59:00-07:00
"""
PDT = timezone(timedelta(hours=-7))
DUE = datetime(2026, 11, 1, 23, 59, tzinfo=PDT)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text)
    return path


# -- reading the rule ------------------------------------------------------------------------------------------


def test_the_rule_is_read_described_and_written_back(tmp_path):
    p = policy.load(_write(tmp_path, RULE))
    assert p.late == LateRule(penalty=0.1, per_day=0.05, max=0.3, due=DUE)
    assert p.describe()["late"] == {"penalty": 0.1, "per_day": 0.05, "max": 0.3, "due": "2026-11-01T23:59:00-07:00"}
    again = policy.load(_write(tmp_path, p.to_toml()))
    assert again.late == p.late
    assert p.fingerprint() != Policy().fingerprint()  # --resume grades everyone again when the rule changes
    flat = policy.load(_write(tmp_path, "[late]\npenalty = 0.25\n")).late
    assert flat == LateRule(penalty=0.25) and flat.text() == "25% off a late submission"


def test_without_the_rule_the_policy_is_what_it_was():
    p = Policy()
    assert p.late is None and "late" not in p.describe() and "[late]" not in p.to_toml()


@pytest.mark.parametrize(
    "table, expected",
    [
        ("penalty = -0.1", r"late.penalty = -0.1 is not a fraction between 0 and 1"),
        ("penalty = 1.5", r"late.penalty = 1.5 is not a fraction between 0 and 1"),
        ('penalty = "10%"', r"late.penalty = '10%' is not a fraction between 0 and 1"),
        ("penalty = true", r"late.penalty = True is not a fraction between 0 and 1"),
        ("penalty = nan", r"late.penalty = nan is not a fraction between 0 and 1"),
        ("per_day = 2", r"late.per_day = 2 is not a fraction between 0 and 1"),
        ("penalty = 0.1\nmax = -1", r"late.max = -1 is not a fraction between 0 and 1"),
        ("penalty = 0.1\nper_week = 0.2", r"unknown key 'late.per_week'"),
        ("max = 0.5", r"\[late\] takes nothing off: give late.penalty or late.per_day"),
        ("penalty = 0.1\ndue = 2026-11-01T23:59:00", r"late.due = .* is not a date and time with its UTC offset"),
        ('penalty = 0.1\ndue = "2026-11-01T23:59:00-07:00"', r"late.due = '2026-11-01T23:59:00-07:00' is not a date"),
        ("penalty = 0.1\ndue = 2026-11-01", r"late.due = datetime.date\(2026, 11, 1\) is not a date and time"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path, table, expected):
    path = _write(tmp_path, f"[late]\n{table}\n")
    with pytest.raises(PolicyError, match=expected) as info:
        policy.load(path)
    assert str(info.value).startswith(f"{path}: ")


def test_late_must_be_a_table(tmp_path):
    path = _write(tmp_path, "late = 0.1\n")
    with pytest.raises(PolicyError, match=r"late must be a table \(\[late\]\), not 0.1"):
        policy.load(path)


# -- what a late submission loses -----------------------------------------------------------------------------


def test_what_a_late_submission_loses():
    rule = LateRule(penalty=0.1, per_day=0.05, max=0.3)
    assert late_penalty(rule, 42, late=False) is None and late_penalty(rule, 42, late=None) is None
    assert late_penalty(None, 42, late=True) is None
    flag = late_penalty(rule, 42, late=True)  # Canvas: late, but not how late
    assert (flag["fraction"], flag["points"]) == (0.1, 4.2) and "per_day is not applied" in flag["note"]
    at = "2026-11-02T00:00:00-07:00"  # one minute late: the first day begun
    one = late_penalty(rule, 42, late=None, submitted_at=at, due="2026-11-01T23:59:00-07:00")
    assert (one["days_late"], one["fraction"], one["points"]) == (1, 0.15, 6.3)
    later = late_penalty(rule, 42, late=None, submitted_at="2026-11-20T00:00:00Z", due="2026-11-01T23:59:00-07:00")
    assert (later["days_late"], later["fraction"]) == (18, 0.3)  # 17 days and 17 hours; capped by max
    assert late_penalty(rule, 42, late=None, submitted_at="2026-11-01T23:00:00-07:00", due=DUE.isoformat()) is None
    result = {"score": 40.5}
    apply_late(result, LateRule(penalty=0.1), late=True)
    assert result == {"score": 36.45, "late_penalty": {"raw_score": 40.5, "fraction": 0.1, "points": 4.05}}
    failed = {"score": 0, "grader_failed": True}
    assert apply_late(failed, rule, late=True) is None and failed == {"score": 0, "grader_failed": True}


# -- grade batch: Canvas's flag and Gradescope's time ----------------------------------------------------------

EX2 = shapes.POINTS["ex2"]  # each student hands in ex2 alone: 2 points
GRADESCOPE = {  # folder: (student id, submitted)
    "submission_1": ("20240001", "2026-11-03 10:00:00.000000000 -07:00"),  # 1 day 10 hours late: 2 days begun
    "submission_2": ("20240002", "2026-11-01 10:00:00.000000000 -07:00"),  # in time
    "submission_3": ("20240003", "2026-11-11 10:00:00.000000000 -07:00"),  # 10 days: capped at 30%
}


def _class(root: Path) -> Path:
    subs = root / "subs"
    shapes._write(subs / "ada_LATE_1001_5001_ex2.py", shapes.REF["ex2"])  # Canvas: late
    shapes._write(subs / "ben_1002_5002_ex2.py", shapes.REF["ex2"])  # Canvas: in time
    meta = ""
    for folder, (sid, when) in GRADESCOPE.items():
        meta += f"{folder}:\n  :submitters:\n  - :name: N{sid}\n    :sid: '{sid}'\n  :created_at: {when}\n"
        shapes._write(subs / "assignment_9_export" / folder / "ex2.py", shapes.REF["ex2"])
    shapes._write(subs / "assignment_9_export" / "submission_metadata.yml", meta)
    return subs


def _batch(subs: Path, out: Path, course: Path | None):
    args = ["batch", str(subs), "--out", str(out), "--jobs", "2", "--timeout", "3", "--no-similarity"]
    cli = CliRunner().invoke(main, args + (["--course", str(course)] if course else []))
    assert cli.exit_code == 0, cli.output
    students = {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}
    return cli.output, students, list(csv.DictReader((out / "gradebook.csv").open(encoding="utf-8")))


@pytest.fixture(scope="module")
def late_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("late")
    subs = _class(root)
    (root / "policy").mkdir()
    course = _write(root / "policy", RULE)  # given with --course: the plain run, beside the class, finds none
    return root, _batch(subs, root / "out", course), _batch(subs, root / "plain", None)


def test_the_policy_line_states_the_rule(late_class):
    _, (said, _, _), (plain, _, _) = late_class
    first = said.splitlines()[0]
    assert first.startswith("course policy: ") and first.endswith(
        ", late penalty 10% off a late submission, 5% a day late (where the platform says how late), at most 30%, "
        "due 2026-11-01T23:59:00-07:00 for a Gradescope export"
    )
    assert "late penalty" not in plain.splitlines()[0]


def test_a_late_canvas_student_loses_the_fraction_and_an_on_time_one_nothing(late_class):
    root, (_, students, book), _ = late_class
    ada, ben = students["ada@canvas"], students["ben@canvas"]
    assert ada["late"] is True and ada["score"] == pytest.approx(EX2 * 0.9)
    assert ada["late_penalty"] == {
        "raw_score": EX2,
        "fraction": 0.1,
        "points": pytest.approx(EX2 * 0.1),
        "note": policy.NO_DAYS,  # Canvas says late, not how late: per_day cannot apply
    }
    assert sum(i["score"] for i in ada["items"]) == EX2  # the items keep their points; the total carries the penalty
    assert ben["late"] is False and ben["score"] == EX2 and "late_penalty" not in ben
    rows = {r["student"]: r for r in book}
    assert list(rows["ada@canvas"]) == [*GRADEBOOK_COLUMNS, *LATE_COLUMNS]
    assert (rows["ada@canvas"]["score"], rows["ada@canvas"]["raw_score"], rows["ada@canvas"]["late_penalty"]) == (
        "1.8",
        "2",
        "0.2",
    )
    assert (rows["ada@canvas"]["ex2"], rows["ada@canvas"]["late"]) == ("2", "yes")
    assert (rows["ben@canvas"]["score"], rows["ben@canvas"]["late_penalty"]) == ("2", "0")
    canvas = {r[1]: r[-1] for r in csv.reader((root / "out" / "canvas.csv").open(encoding="utf-8"))}
    assert (canvas["1001"], canvas["1002"]) == ("1.8", "2")  # what Canvas imports is the penalised score


def test_a_gradescope_student_loses_per_day_from_the_submission_time(late_class):
    _, (_, students, book), _ = late_class
    two, on_time, ten = (students[f"2024000{k}@gradescope"] for k in (1, 2, 3))
    assert two["late"] is True and two["late_penalty"]["days_late"] == 2
    assert two["late_penalty"]["fraction"] == pytest.approx(0.1 + 2 * 0.05)
    assert two["score"] == pytest.approx(EX2 * 0.8)
    assert two["late_penalty"]["submitted_at"] == "2026-11-03T10:00:00-07:00"
    assert two["late_penalty"]["due"] == "2026-11-01T23:59:00-07:00"
    assert on_time["late"] is False and on_time["score"] == EX2 and "late_penalty" not in on_time
    assert ten["late_penalty"]["days_late"] == 10 and ten["late_penalty"]["fraction"] == 0.3  # max
    assert {r["student"]: r["late"] for r in book}["20240002@gradescope"] == "no"


def test_the_penalty_is_stated_in_the_summary_the_report_and_the_feedback(late_class):
    root, (_, students, _), _ = late_class
    out = root / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"]["late"] == {
        "penalty": 0.1,
        "per_day": 0.05,
        "max": 0.3,
        "due": "2026-11-01T23:59:00-07:00",
    }
    assert summary["late_penalty"]["ada@canvas"] == {"raw_score": EX2, "fraction": 0.1, "points": 0.2}
    assert summary["late_penalty"]["20240001@gradescope"]["days_late"] == 2
    assert set(summary["late_penalty"]) == {"ada@canvas", "20240001@gradescope", "20240003@gradescope"}
    assert summary["late"]["20240002@gradescope"] is False
    assert summary["score"]["min"] == pytest.approx(EX2 * 0.7)

    page = (out / "report.html").read_text()
    ada = page[page.index('data-student="ada@canvas"><h3>') :]
    ada = ada[: ada.index("</section>")]
    assert "ada@canvas: 1.8/42" in ada and 'data-marker="late-penalty"' in ada and 'data-marker="late"' in ada
    assert "10% of the score is taken off: 0.2 points (the score before the penalty is 2)" in ada
    two = page[page.index('data-student="20240001@gradescope"><h3>') :]
    assert "submitted 2 days after the due date" in two[: two.index("</section>")]
    assert 'title="2 before the late penalty of 0.2"' in page

    feedback = (out / "feedback" / "ada@canvas.md").read_text()
    assert "Score: **1.8 / 42**" in feedback
    assert "Late penalty: submitted late, so 10% of the score is taken off: 0.2 points" in feedback
    assert "submitted 2 days late" in (out / "feedback" / "20240001@gradescope.md").read_text()
    assert "Late penalty" not in (out / "feedback" / "ben@canvas.md").read_text()


def test_without_the_rule_nothing_is_taken_off_or_said(late_class):
    root, (_, with_rule, _), (_, students, book) = late_class
    assert all("late_penalty" not in r for r in students.values())
    assert {s: r["score"] for s, r in students.items()} == dict.fromkeys(with_rule, EX2)
    assert "late" not in students["20240001@gradescope"]  # Gradescope's export alone says nothing of lateness
    assert list(book[0]) == list(GRADEBOOK_COLUMNS)
    plain = root / "plain"
    summary = json.loads((plain / "summary.json").read_text())
    assert "late_penalty" not in summary and "late" not in summary["policy"]
    assert not any("Late penalty" in f.read_text() for f in (plain / "feedback").glob("*.md"))
    assert 'data-marker="late-penalty"' not in (plain / "report.html").read_text()


# -- the Gradescope autograder: submission_metadata.json -------------------------------------------------------


def _metadata(root: Path, created: str, due: str | None = "2026-11-01T23:59:00.000000-07:00", **more) -> None:
    data = {"id": 1, "created_at": created, "assignment": {"due_date": due, "late_due_date": None}, **more}
    (root / gradescope.METADATA).write_text(json.dumps(data))


def _autograde(tmp_path, monkeypatch, rule: LateRule | None, hidden_visibility: str = "after_published") -> dict:
    from tests.test_gradescope import _fake_runner, _result, validate

    _fake_runner(monkeypatch, lambda submission, exercises, **kw: _result([item_json("ex2", "dlogits", max_score=5)]))
    (tmp_path / "submission").mkdir(exist_ok=True)
    (tmp_path / "submission" / "ex2.py").write_text("pass\n")
    course = Policy(secret="a long enough course secret", hidden_visibility=hidden_visibility, late=rule)
    out = gradescope.run(tmp_path, policy=course)
    validate(out)
    assert json.loads((tmp_path / "results" / "results.json").read_text()) == out
    return out


def test_the_autograder_takes_per_day_off_from_gradescopes_metadata(tmp_path, monkeypatch):
    _metadata(tmp_path, "2026-11-04T08:00:00.123456-07:00")  # 2 days 8 hours late: 3 days begun
    out = _autograde(tmp_path, monkeypatch, LateRule(penalty=0.1, per_day=0.05))
    assert out["score"] == pytest.approx(5 * (1 - 0.25))
    assert "Late: submitted 3 days after the due date, so a late penalty of 25% of the score applies." in out["output"]
    assert "points off" not in out["output"]  # the points stay hidden with the hidden tests
    (staff,) = [t for t in out["tests"] if t["name"] == "late penalty (instructors only)"]
    assert staff["visibility"] == "hidden" and "25% of 5 = 1.25 points off; score 3.75" in staff["output"]


def test_the_autograder_says_the_points_once_scores_are_shown(tmp_path, monkeypatch):
    _metadata(tmp_path, "2026-11-02T08:00:00Z")
    out = _autograde(tmp_path, monkeypatch, LateRule(penalty=0.1, per_day=0.05), hidden_visibility="visible")
    assert out["score"] == pytest.approx(5 * 0.85)
    assert "15% of the score applies: 0.75 points off, 5 before the penalty." in out["output"]
    assert "Score: 4.25 / 5" in out["output"]


def test_the_autograder_takes_nothing_off_in_time_or_without_the_rule(tmp_path, monkeypatch):
    _metadata(tmp_path, "2026-11-01T20:00:00-07:00")
    out = _autograde(tmp_path, monkeypatch, LateRule(penalty=0.5))
    assert out["score"] == 5 and "Late" not in out["output"] and len(out["tests"]) == 2
    _metadata(tmp_path, "2026-12-01T20:00:00-07:00")
    plain = _autograde(tmp_path, monkeypatch, None)
    assert plain["score"] == 5 and len(plain["tests"]) == 2
    # a student's own due date (an extension), where the metadata gives one per user, is theirs
    users = [{"name": "A", "assignment": {"due_date": "2026-12-02T23:59:00-07:00"}}]
    _metadata(tmp_path, "2026-12-01T20:00:00-07:00", users=users)
    assert _autograde(tmp_path, monkeypatch, LateRule(penalty=0.5))["score"] == 5


def test_the_autograder_says_to_instructors_when_it_cannot_tell(tmp_path, monkeypatch):
    out = _autograde(tmp_path, monkeypatch, LateRule(penalty=0.5))  # no submission_metadata.json
    (staff,) = [t for t in out["tests"] if t["visibility"] == "hidden" and "instructors only" in t["name"]]
    assert "not applied: there is no submission_metadata.json" in staff["output"] and out["score"] == 5
    _metadata(tmp_path, "2026-11-04T08:00:00-07:00", due=None)
    out = _autograde(tmp_path, monkeypatch, LateRule(penalty=0.5))
    assert "gives no due date" in out["tests"][-1]["output"] and out["score"] == 5


def test_the_autograder_zip_carries_the_rule(tmp_path):
    import zipfile

    rule = LateRule(penalty=0.1, per_day=0.05, max=0.3)
    course = Policy(secret="a long enough course secret", late=rule)
    archive = gradescope.build_autograder_zip(tmp_path / "a.zip", Path(__file__).resolve().parents[1], policy=course)
    with zipfile.ZipFile(archive) as zf:
        text = zf.read("course.toml").decode()
    assert policy.load(_write(tmp_path, text)).late == rule
