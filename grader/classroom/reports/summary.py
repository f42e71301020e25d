"""Class statistics for summary.json: counts per item, who hit each trap, who was flagged, what was skipped."""

from __future__ import annotations

import statistics

from grader.classroom.reports.tables import canvas_rows
from grader.grading.results import STATUSES
from grader.spec import catalogue

# traps that say more about how the code ran than about the maths; the report lists them with the sandbox flags
SANDBOX_TRAPS = ("uses-autograd",)
PRIVATE = "private-internals"  # the runner's result["flags"]["private_internals"]: reaching into internals
NUMERIC = "numeric-differentiation"  # result["flags"]["numeric_differentiation"]: complex step, finite differences


def summarize(students: dict[str, dict], skipped=(), stale=()) -> dict:
    """Count, per item, students by status; per trap, students who hit it; list who was flagged or skipped."""
    items: dict[str, dict[str, int]] = {i.id: {} for i in catalogue.items()}
    trap_students: dict[str, set] = {}
    errored, timed_out = set(), set()
    intake_flags: dict[str, set] = {}
    private, numeric = set(), set()
    scores = []
    for student in sorted(students):
        r = students[student]
        scores.append(r["score"])
        for item in r["items"]:
            counts = items.setdefault(item["id"], {})
            counts[item["status"]] = counts.get(item["status"], 0) + 1
            for t in item["traps"]:
                trap_students.setdefault(t, set()).add(student)
            if item["status"] == "error":
                errored.add(student)
            if item["status"] == "timeout":
                timed_out.add(student)
        if (r.get("flags") or {}).get("private_internals"):
            private.add(student)
        if (r.get("flags") or {}).get("numeric_differentiation"):
            numeric.add(student)
        for flag in r.get("intake_flags") or []:
            intake_flags.setdefault(flag, set()).add(student)
    sandbox = {"error": sorted(errored), "timeout": sorted(timed_out)}
    for t in SANDBOX_TRAPS:
        if t in trap_students:
            sandbox[t] = sorted(trap_students[t])
    if private:
        sandbox[PRIVATE] = sorted(private)
    if numeric:
        sandbox[NUMERIC] = sorted(numeric)
    n = len(students)
    out = {
        "students": n,
        "max_score": students[next(iter(students))]["max_score"] if students else 0,
        "score": {
            "mean": round(statistics.fmean(scores), 4) if scores else None,
            "median": statistics.median(scores) if scores else None,
            "min": min(scores) if scores else None,
            "max": max(scores) if scores else None,
        },
        "items": {k: {s: v.get(s, 0) for s in STATUSES} for k, v in items.items()},
        "traps": {t: len(s) for t, s in sorted(trap_students.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        "trap_students": {t: sorted(s) for t, s in sorted(trap_students.items())},
        "errored": sorted(errored),
        "timed_out": sorted(timed_out),
        "sandbox_flags": sandbox,
        "intake_flags": {f: sorted(s) for f, s in sorted(intake_flags.items())},
        # what the source says: Canvas marks late submissions (true/false); a folder or Gradescope says nothing (but
        # with course.toml's [late] due, Gradescope's submission time says)
        "late": {s: students[s]["late"] for s in sorted(students) if isinstance(students[s].get("late"), bool)},
        "canvas_unmatched": canvas_rows(students)[1],  # no row in canvas.csv: reason -> students
        "skipped": [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in skipped],
        "stale_removed": sorted(stale),
    }
    penalised = {s: students[s]["late_penalty"] for s in sorted(students) if students[s].get("late_penalty")}
    if penalised:  # course.toml's [late]: who lost what (their score above is after it); absent without the rule
        keys = ("raw_score", "fraction", "points", "days_late")
        out["late_penalty"] = {s: {k: p[k] for k in keys if k in p} for s, p in penalised.items()}
    return out
