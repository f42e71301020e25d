"""The CSV outputs: the gradebook, and the same scores in the column layout a Canvas gradebook import expects.

Every text cell goes through defusedcsv, so a student id like `=2+5` is written as `'=2+5` and no spreadsheet
runs it as a formula.

Canvas's import (canvas-lms lib/gradebook_importer.rb) reads a header `Student, ID, SIS User ID, SIS Login ID,
Section` then one column per assignment, `Title (assignment id)`; a row whose first cell holds `Points Possible`
sets the points; it matches each row to a student by ID (the Canvas user id), else SIS User ID, else SIS Login ID,
else by the Student cell equal to a student's name, and lists the rows it matched to nobody.
"""

from __future__ import annotations

import io

from defusedcsv import csv

from grader.spec import catalogue

IDENTITY_COLUMNS = ("name", "email", "sid", "canvas_id")
GRADEBOOK_COLUMNS = (
    "student",
    "score",
    "max_score",
    *catalogue.EXERCISES,
    *IDENTITY_COLUMNS,
    "late",
    "intake_flags",
)
# with course.toml's [late]: the score before the penalty and the points it took (the score column is after it)
LATE_COLUMNS = ("raw_score", "late_penalty")
# items.csv: one row per student and item (long format), what a spreadsheet's pivot table takes as its source
ITEM_COLUMNS = ("student", "exercise", "item", "status", "score", "max_score", "traps")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_ASSIGNMENT = "Backprop ninja"
# the late column; empty where the source does not say (a folder; Gradescope, unless course.toml's [late] gives `due`)
LATE = {True: "yes", False: "no"}
# why a student has no row in canvas.csv (summary.json's canvas_unmatched)
UNMATCHED_LOCAL = "not from a Canvas or Gradescope download: no Canvas user id or student id to match"
UNMATCHED_NO_SID = "Gradescope gave no student id"
UNMATCHED_CONTESTED = "its student id is claimed by another submission too (duplicate-id): decide who is who"
UNMATCHED_ANONYMOUS = "an anonymous Canvas submission (anonymous grading): no Canvas user id"
UNMATCHED_GRADER_FAILED = "the grader failed on it (see summary.json's grader_failed): grade again with --resume"


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


def gradebook(students: dict[str, dict], late_rule: bool = False) -> str:
    """Return the gradebook CSV: one row per student, a column per exercise, then who the student is.

    late_rule: the course has a late penalty ([late]): `score` is after it, and two more columns say the score
    before it and the points it took (0 for a student who lost none); the exercise columns are never penalised.
    """
    buf = io.StringIO()
    writer = _writer(buf)
    writer.writerow(GRADEBOOK_COLUMNS + (LATE_COLUMNS if late_rule else ()))
    for student in sorted(students):
        r = students[student]
        ident = r.get("identity") or {}
        failed = bool(r.get("grader_failed"))  # no score at all, never a 0 an import would take as one
        row = [
            student,
            "" if failed else _num(r["score"]),
            _num(r["max_score"]),
            *("" if failed else _num(v) for v in exercise_scores(r).values()),
            *(ident.get(c, "") for c in IDENTITY_COLUMNS),
            LATE.get(r.get("late"), ""),
            " ".join([*(r.get("intake_flags") or []), *(["grader-failed"] if failed else [])]),
        ]
        if late_rule:
            penalty = r.get("late_penalty") or {"raw_score": r["score"], "points": 0}
            row += ["", ""] if failed else [_num(penalty["raw_score"]), _num(penalty["points"])]
        writer.writerow(row)
    return buf.getvalue()


def item_table(students: dict[str, dict]) -> str:
    """Return items.csv: a row per student and item (status, score, points, traps), students sorted, items in order.

    Long rather than wide: a pivot table (rows student, columns item or exercise, values score) rebuilds any grid
    from it, filters on status or trap, and sums by exercise; a grid of scores could do none of that. A student the
    grader failed on has empty score cells, as in the gradebook.
    """
    buf = io.StringIO()
    writer = _writer(buf)
    writer.writerow(ITEM_COLUMNS)
    for student in sorted(students):
        r = students[student]
        failed = bool(r.get("grader_failed"))
        for item in r["items"]:
            writer.writerow(
                [
                    student,
                    item["exercise"],
                    item["id"],
                    item["status"],
                    "" if failed else _num(item["score"]),
                    _num(item["max_score"]),
                    " ".join(item.get("traps") or []),
                ]
            )
    return buf.getvalue()


def canvas_gradebook(students: dict[str, dict], assignment: str = CANVAS_ASSIGNMENT) -> str:
    """Return a CSV for Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, the score.

    Name the assignment column `Title (assignment id)` (--canvas-assignment) so Canvas finds the assignment by id.
    Only students Canvas can match by an id have a row: a Canvas download's user id goes into ID, a Gradescope
    student id into SIS User ID. SIS Login ID stays empty: a Canvas download names its files by the student's
    sortable name, never the login, and a name in that column could match another student's login. Students with
    no id (a folder, an archive, a notebook; a contested Gradescope id) are listed in summary.json's
    canvas_unmatched instead of rows Canvas would reject or, matching by name, give to the wrong student.
    """
    buf = io.StringIO()
    writer = _writer(buf)
    writer.writerow([*CANVAS_COLUMNS, assignment])
    max_score = next(iter(students.values()))["max_score"] if students else 0
    writer.writerow(["Points Possible", "", "", "", "", _num(max_score)])
    writer.writerows(canvas_rows(students)[0])
    return buf.getvalue()


def canvas_rows(students: dict[str, dict]) -> tuple[list[list[str]], dict[str, list[str]]]:
    """Return canvas.csv's student rows, and {reason: students} for those Canvas could not match (sorted)."""
    rows, unmatched = [], {}
    for student in sorted(students):
        r = students[student]
        identity = r.get("identity") or {}
        group = members(identity)
        for ident in group:
            uid, sid = ident.get("canvas_id", ""), ident.get("sid", "")
            if r.get("grader_failed"):
                unmatched.setdefault(UNMATCHED_GRADER_FAILED, []).append(student)
                continue
            if uid or sid:
                rows.append([_student_cell(student, ident), uid, sid, "", "", _num(r["score"])])
                continue
            if identity.get("claimed_sid"):
                why = UNMATCHED_CONTESTED
            elif identity.get("canvas_anonymous_id"):
                why = UNMATCHED_ANONYMOUS
            else:
                why = UNMATCHED_NO_SID if identity else UNMATCHED_LOCAL
            who = f"{student} ({ident['name']})" if len(group) > 1 and ident.get("name") else student
            unmatched.setdefault(why, []).append(who)
    return rows, {k: unmatched[k] for k in sorted(unmatched)}


def _student_cell(student: str, ident: dict[str, str]) -> str:
    """Return the Student cell: the name with the key, which no Canvas name equals, so a row whose ids Canvas does
    not know is listed unmatched, never given by name to whoever has that name; never 'Points Possible'."""
    cell = f"{ident['name']} ({student})" if ident.get("name") else student
    return cell.replace("Points Possible", "Points_Possible")  # Canvas takes such a row for the points row


def members(identity: dict[str, str]) -> list[dict[str, str]]:
    """Split a group submission's identity ('Ann; Bo') into one identity per member, for per-student rows."""
    split = {k: v.split("; ") for k, v in identity.items()}
    count = max((len(v) for v in split.values()), default=1)
    if count == 1:
        return [identity]
    return [{k: v[i] for k, v in split.items() if i < len(v) and v[i]} for i in range(count)]
