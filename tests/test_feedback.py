"""What `grade batch` adds for the term: items.csv (a row per student and item) and feedback/<student>.md."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from pathlib import Path

import pytest

from grader.classroom.reports import write_outputs
from grader.classroom.reports.feedback import NOT_GRADED, feedback, file_name, md, student_notes, write_feedback
from grader.classroom.reports.tables import ITEM_COLUMNS, item_table
from grader.grading.scan import flagged_note, numeric_note
from grader.grading.traps import TRAPS
from grader.submissions.intake import discover
from grader.submissions.intake import messages as msg
from tests.conftest import item_json as _item

GOLDEN = Path(__file__).resolve().parent / "golden" / "batch" / "students"


def _student(items, **extra):
    result = {
        "submission": "s",
        "score": sum(i["score"] for i in items),
        "max_score": sum(i["max_score"] for i in items),
        "items": items,
        "problems": [],
        "notes": [],
    }
    result.update(extra)
    return result


def _class() -> dict[str, dict]:
    return {
        "ben": _student(
            [
                _item("ex1", "dC", "failed", traps=["dC-repeated-rows"], message="Rows 3, 5 are wrong."),
                _item("ex2", "dlogits", max_score=2.0),
            ]
        ),
        "=2+5": _student([_item("ex1", "dC"), _item("ex2", "dlogits", "timeout", max_score=2.0)]),
        "ada": _student([_item("ex1", "dC"), _item("ex2", "dlogits", max_score=2.0)], grader_failed=True),
    }


# ----------------------------------------------------------------------------------------------------------
# items.csv


def test_items_csv_is_long_a_row_per_student_and_item():
    rows = list(csv.reader(io.StringIO(item_table(_class()))))
    assert tuple(rows[0]) == ITEM_COLUMNS == ("student", "exercise", "item", "status", "score", "max_score", "traps")
    assert rows[1:] == [
        ["'=2+5", "ex1", "ex1.dC", "passed", "1", "1", ""],  # a cell a spreadsheet would run is escaped
        ["'=2+5", "ex2", "ex2.dlogits", "timeout", "0", "2", ""],
        ["ada", "ex1", "ex1.dC", "passed", "", "1", ""],  # the grader failed on ada: no score, as in the gradebook
        ["ada", "ex2", "ex2.dlogits", "passed", "", "2", ""],
        ["ben", "ex1", "ex1.dC", "failed", "0", "1", "dC-repeated-rows"],
        ["ben", "ex2", "ex2.dlogits", "passed", "2", "2", ""],
    ]


# ----------------------------------------------------------------------------------------------------------
# feedback/<student>.md


def test_feedback_has_the_table_and_what_failed():
    items = [
        _item("ex1", "dC", "failed", traps=["dC-repeated-rows"], message="Rows 3, 5 are wrong."),
        _item("ex1", "db2", "failed", shape=[1, 27], expected_shape=[27], message="Returned shape (1, 27)."),
        _item("ex1", "dW1", "passed", traps=["note-only"], message="A note on a passing item."),
        _item("ex1", "dh", "passed", message="never shown: the table shows no message for a plain pass"),
        _item("ex2", "dlogits", "not_attempted", max_score=2.0, shape=None, maxdiff=None, message="a stub"),
    ]
    text = feedback("ben", _student(items))
    assert text.startswith("# Backprop ninja: feedback for `ben`\n\nScore: **2 / 6** (2 passed, 2 failed, 1 not")
    assert "| item | status | points | maxdiff | shape |" in text
    assert "| `ex1.dC` | failed | 0/1 | 2.50e-01 | [32, 27] |" in text
    assert "| `ex1.db2` | failed | 0/1 | 2.50e-01 | [1, 27], expected [27] |" in text
    assert "| `ex2.dlogits` | not attempted | 0/2 | - | - |" in text
    assert "- `ex1.dC` (failed): Rows 3, 5 are wrong." in text
    assert "- `ex1.dW1` (passed): A note on a passing item." in text
    assert "never shown" not in text and "a stub" not in text


def test_a_whole_file_problem_is_said_once():
    said = "ex4.py could not be loaded (line 1), so none of its functions were graded."
    items = [_item("ex4", n, "error", message=said) for n in ("dC", "dW1")]
    problem = {"exercise": "ex4", "file": "ex4.py", "items": ["ex4.dC", "ex4.dW1"], "message": said, "status": "error"}
    problems = [problem]
    text = feedback("ben", _student(items, problems=problems))
    assert text.count("could not be loaded") == 1
    assert "## Whole files\n\n- `ex4.py` (2 items error): ex4.py could not be loaded" in text


def test_feedback_leaves_out_what_is_for_the_instructor():
    notes = [
        msg.GRADED_FILE.format(exercise="ex1", label="hw/ex1.py"),
        msg.STUB_IGNORED.format(exercise="ex1", labels="exercises/ex1.py"),
        msg.DUPLICATE_ID.format(student="20240001", others="submission_2 (Cleo Classmate)"),
        msg.ID_COLLISION.format(id="ada", others="ada@canvas (Cleo Classmate)"),
        msg.CANVAS_LATE,
        msg.SUBMITTED_AT.format(when="2024-05-01 Cleo Classmate"),
        msg.NOT_IN_METADATA.format(folder="submission_9 Cleo Classmate"),
        "Gradescope folder submission_3 Cleo Classmate",
    ]
    result = _student(
        [_item("ex1", "dC")],
        notes=notes,
        identity={"name": "Ben Student", "email": "ben@uni.edu", "sid": "20240001"},
        intake_flags=["duplicate-id"],
        late=True,
    )
    text = feedback("20240001_submission_1@gradescope", result)
    assert "Cleo" not in text and "Ben Student" not in text and "ben@uni.edu" not in text
    assert "duplicate" not in text and "late" not in text.lower()
    assert "- ex1: graded hw/ex1.py\n- ex1: ignored exercises/ex1.py: identical to the stub\n" in text
    assert student_notes(notes) == notes[:2]


def test_the_flags_the_table_shows_are_kept_in_its_words():
    private = [{"exercise": "ex1", "line": 136, "what": "private attribute .__eq__", "code": "x"}]
    numeric = [{"exercise": "ex4", "line": 12, "what": "a complex step", "code": "y"}]
    result = _student([_item("ex1", "dC")], flags={"private_internals": private, "numeric_differentiation": numeric})
    text = feedback("ben", result)
    for line in (flagged_note(private), numeric_note(numeric)):
        assert f"- {md(line)}" in text
    assert "flagged for your instructor (no points change)" in text


def test_a_student_the_grader_failed_on_gets_no_score():
    text = feedback("ada", _class()["ada"])
    assert NOT_GRADED in text and "Score:" not in text
    assert "| `ex1.dC` | passed | - |" in text


def test_student_text_renders_as_written():
    message = "Raised ValueError: <script>alert(1)</script> *bold* [x](http://e.vil) \x1b[2J at `a <b> c`"
    text = md(message + "\n# not a heading\n1. not a list")
    assert "<script>" not in text and "\\<script\\>" in text
    assert "\\*bold\\*" in text and "\\[x\\](http://e.vil)" in text
    assert "\x1b" not in text and "\\\\x1b\\[2J" in text  # shown as the escape \x1b, never sent to a terminal
    assert "`a <b> c`" in text  # a code span shows its text as is
    assert "\n  \\# not a heading\n  1\\. not a list" in text
    assert md("requires_grad_() on x_1") == "requires_grad\\_() on x_1"


def test_no_text_above_the_course_level_on_the_golden_class():
    """The golden class is graded at diagnose: no trap's hint or explanation may reach a feedback file."""
    students = {p.stem: json.loads(p.read_text()) for p in sorted(GOLDEN.glob("*.json"))}
    assert len(students) == 120
    hit = 0
    for student, result in students.items():
        text = feedback(student, result)
        assert text.startswith(f"# Backprop ninja: feedback for `{student}`")
        for item in result["items"]:
            for trap in item["traps"]:
                if trap in TRAPS and TRAPS[trap].explain:
                    hit += 1
                    assert " ".join(TRAPS[trap].explain.split())[:60] not in text, (student, trap)
            if item["message"] and item["status"] not in ("passed", "not_attempted"):
                assert md(item["message"]) in text or any(
                    md(p["message"]) in text for p in result["problems"] if item["id"] in p["items"]
                ), (student, item["id"])
    assert hit > 20


# ----------------------------------------------------------------------------------------------------------
# file names, stale files, determinism


def test_feedback_files_are_named_like_the_students_json(tmp_path):
    subs = tmp_path / "subs"
    names = ["plain", "=2+5", "back\\slash", "tab\there", "x" * 200, "caf\u0065\u0301"]
    for name in names:
        (subs / name).mkdir(parents=True)
        (subs / name / "ex2.py").write_text("pass\n")
    entries, _ = discover(subs)
    keys = [e.student for e in entries]
    assert len(keys) == len(names)
    written = write_feedback(tmp_path / "out", {k: _student([_item("ex2", "dlogits")]) for k in keys})
    assert written == sorted(f"{k}.md" for k in keys)  # as batch writes students/<key>.json
    assert all((tmp_path / "out" / "feedback" / w).is_file() for w in written)
    assert file_name("../../escape") == ".._.._escape.md" and file_name("..") == "student.md"


def test_write_outputs_adds_items_csv_and_feedback_byte_identically(tmp_path):
    out = tmp_path / "out"
    (out / "students").mkdir(parents=True)
    (out / "feedback").mkdir()
    (out / "feedback" / "gone.md").write_text("a student no longer in the class")
    students = _class()
    write_outputs(out, [], [], students, similarity=False)
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["=2+5.md", "ada.md", "ben.md"]
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert Path("items.csv") in first
    shuffled = list(students.items())
    random.Random(7).shuffle(shuffled)
    write_outputs(out, [], [], dict(shuffled), similarity=False)
    again = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert again == first


@pytest.mark.parametrize("status", ["failed", "error", "timeout"])
def test_every_failing_status_shows_its_message(status):
    text = feedback("ben", _student([_item("ex3", "dhprebn", status, max_score=4.0, message=f"it {status}")]))
    assert re.search(rf"- `ex3.dhprebn` \(\w[\w ]*\): it {status}", text)
