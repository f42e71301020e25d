"""The CSV outputs: the gradebook, and the same scores in the column layout a Canvas gradebook import expects.

Every text cell goes through defusedcsv, so a student id like `=2+5` is written as `'=2+5` and no spreadsheet
runs it as a formula.
"""

from __future__ import annotations

import io

from defusedcsv import csv

from grader.spec import catalogue

IDENTITY_COLUMNS = ("name", "email", "sid", "canvas_id")
GRADEBOOK_COLUMNS = ("student", "score", "max_score", *catalogue.EXERCISES, *IDENTITY_COLUMNS, "intake_flags")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_ASSIGNMENT = "Backprop ninja"


def _num(x: float) -> str:
    return f"{x:g}"


def exercise_scores(result: dict) -> dict[str, float]:
    """Return a student's score per exercise (0 for an exercise not graded)."""
    per_ex = {ex: 0.0 for ex in catalogue.EXERCISES}
    for item in result["items"]:
        per_ex[item["exercise"]] = per_ex.get(item["exercise"], 0.0) + item["score"]
    return per_ex


def _writer(buf):
    return csv.writer(buf, lineterminator="\n")


def gradebook(students: dict[str, dict]) -> str:
    """Return the gradebook CSV: one row per student, a column per exercise, then who the student is."""
    buf = io.StringIO()
    writer = _writer(buf)
    writer.writerow(GRADEBOOK_COLUMNS)
    for student in sorted(students):
        r = students[student]
        ident = r.get("identity") or {}
        writer.writerow(
            [
                student,
                _num(r["score"]),
                _num(r["max_score"]),
                *(_num(v) for v in exercise_scores(r).values()),
                *(ident.get(c, "") for c in IDENTITY_COLUMNS),
                " ".join(r.get("intake_flags") or []),
            ]
        )
    return buf.getvalue()


def canvas_gradebook(students: dict[str, dict], assignment: str = CANVAS_ASSIGNMENT) -> str:
    """Return a CSV for Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, the score.

    Canvas matches rows on ID (its user id, which a Canvas bulk download carries in every file name), then SIS
    User ID (the student id Gradescope's metadata carries), then SIS Login ID. A row with none of them is still
    written, and Canvas's import preview lists it as unmatched.
    """
    buf = io.StringIO()
    writer = _writer(buf)
    writer.writerow([*CANVAS_COLUMNS, assignment])
    max_score = next(iter(students.values()))["max_score"] if students else 0
    writer.writerow(["Points Possible", "", "", "", "", _num(max_score)])
    for student in sorted(students):
        r = students[student]
        for ident in members(r.get("identity") or {}):
            writer.writerow(
                [
                    ident.get("name", student),
                    ident.get("canvas_id", ""),
                    ident.get("sid", ""),
                    ident.get("login", ""),
                    "",
                    _num(r["score"]),
                ]
            )
    return buf.getvalue()


def members(identity: dict[str, str]) -> list[dict[str, str]]:
    """Split a group submission's identity ('Ann; Bo') into one identity per member, for per-student rows."""
    split = {k: v.split("; ") for k, v in identity.items()}
    count = max((len(v) for v in split.values()), default=1)
    if count == 1:
        return [identity]
    return [{k: v[i] for k, v in split.items() if i < len(v) and v[i]} for i in range(count)]
