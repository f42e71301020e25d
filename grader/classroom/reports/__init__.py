"""What `grade batch` writes at the end: CSVs, summary.json, report.html, feedback, similarity; stale files go."""

from __future__ import annotations

import json
import os
from pathlib import Path

# The modules that write each output are imported where they are used: they import torch (the catalogue),
# and `grade batch` starts the similarity check from this package before torch is imported.

EMPTY_CLASS = "no submission to grade in {folder}"
DETAIL_LINE = "{skipped} entries skipped, {flagged} students flagged by intake, {pairs} similar pairs; see report.html"


class EmptyClassError(ValueError):
    """The submissions folder holds nobody to grade."""

    def __init__(self, folder: Path, skipped=()):
        self.skipped = list(skipped)
        lines = [EMPTY_CLASS.format(folder=folder)] + [f"  skipped {s.name}: {s.reason}" for s in self.skipped]
        super().__init__("\n".join(lines))


def detail_line(summary: dict) -> str:
    """Return the second line of a batch run's outcome: what was skipped, flagged and found alike."""
    flagged = {s for who in summary.get("intake_flags", {}).values() for s in who}
    pairs = len((summary.get("similarity") or {}).get("pairs", []))
    return DETAIL_LINE.format(skipped=len(summary.get("skipped", [])), flagged=len(flagged), pairs=pairs)


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def remove_stale(students_dir: Path, keep) -> list[str]:
    """Delete students/<id>.json of students no longer in the submissions folder; return their ids."""
    stale = []
    for f in sorted(students_dir.glob("*.json")):
        if f.name[: -len(".json")] not in keep:
            f.unlink()
            stale.append(f.name[: -len(".json")])
    return stale


def write_outputs(
    out: Path,
    entries,
    skipped,
    students: dict[str, dict],
    *,
    similarity: bool | dict = True,
    canvas_assignment: str | None = None,
    sandbox: dict | None = None,
    grader_failed: list[str] = (),
    policy: dict | None = None,
    sources=None,
) -> dict:
    """Write gradebook.csv, items.csv, canvas.csv, summary.json, report.html and feedback/<student>.md for graded
    students; return the summary.

    similarity: True to compare the class now, False not to, or the dict class_similarity() already returned.
    sources: the code each student was graded on, for report.html only (see write_report).
    """
    from grader.classroom.reports.feedback import write_feedback
    from grader.classroom.reports.summary import summarize
    from grader.classroom.reports.tables import CANVAS_ASSIGNMENT, canvas_gradebook, gradebook, item_table

    stale = remove_stale(out / "students", set(students))
    late_rule = "late" in (policy or {})  # course.toml's [late]: the gradebook states the raw score and the penalty
    _write_text(out / "gradebook.csv", gradebook(students, late_rule=late_rule))
    _write_text(out / "items.csv", item_table(students))
    _write_text(out / "canvas.csv", canvas_gradebook(students, canvas_assignment or CANVAS_ASSIGNMENT))
    summary = summarize(students, skipped, stale)
    if sandbox is not None:  # which walls the sandbox had on this machine (jail.Protections)
        summary["sandbox"] = sandbox
    if policy is not None:  # the course policy the run used (spec.policy.Policy.describe)
        summary["policy"] = policy
    if grader_failed:  # the grader, not the student, failed: no score for them (grade again with --resume)
        summary["grader_failed"] = sorted(grader_failed)
    if isinstance(similarity, dict):
        summary["similarity"] = similarity
    elif similarity:
        summary["similarity"] = class_similarity(entries)
    _write_json(out / "summary.json", summary)
    # one file per student to hand back, at the course's message level: written while a child writes the report
    write_report(out / "report.html", summary, students, sources, meanwhile=lambda: write_feedback(out, students))
    return summary


def write_report(path: Path, summary: dict, students: dict[str, dict], sources=None, meanwhile=None) -> None:
    """Write report.html.

    sources: None (the graded files by name only), {student: sources.StudentCode}, or a function returning that,
    which is called in a throwaway child that writes the page itself: the code it reads never enters this process,
    whose memory grading processes inherit (see sources.py). If that child fails, the page is written here without
    the code, and says why. meanwhile: other work of this process, done while that child writes (or first).
    """
    from grader.classroom.reports.html import html_report

    if not callable(sources):
        if meanwhile is not None:
            meanwhile()
        _write_text(path, html_report(summary, students, sources))
        return
    from grader.classroom import pool
    from grader.classroom.reports.sources import READ_SECONDS

    read, limit = sources, 600 + READ_SECONDS * len(students)  # each student's reading has its own bound
    writing = pool.Background(lambda: _write_text(path, html_report(summary, students, read())) or True)
    try:
        if meanwhile is not None:
            meanwhile()
        try:
            writing.result(timeout=limit)
            return
        except RuntimeError as exc:  # the helper died or overran: the report all the same, saying why
            note = f"The graded code could not be read again: {exc}."
    except BaseException:  # noqa: B036 - a full disk, a Ctrl-C, a TERM: no child goes on writing the page,
        writing.kill()
        path.unlink(missing_ok=True)  # and no report of an earlier run sits beside this run's gradebook
        raise
    _write_text(path, html_report(summary, students, None, code_note=note))


def _write_text(path: Path, text: str) -> None:
    """Write UTF-8, whole or not at all; bytes of a student's file name that are not UTF-8 (lone surrogates) become
    U+FFFD."""
    from grader.submissions.intake.finding import shown

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(shown(text), encoding="utf-8")
    os.replace(tmp, path)


def class_similarity(entries, base=()) -> dict:
    """Read every entry's files and compare the class function by function (summary.json's "similarity").

    base: the course's base files (course.toml's [similarity] base), whose code is never evidence.
    """
    from grader.classroom import deadline
    from grader.classroom.reports.similarity import compare_class
    from grader.submissions.intake import read_entry

    sources, unread = {}, []
    for e in entries:  # one student whose files take long to read (a notebook built for it) is left out alone
        try:
            with deadline.overall(deadline.SIMILARITY_READ):
                sources[e.student] = {ex: s.text for ex, s in read_entry(e).sources.items()}
        except (Exception, deadline.GradingTooLong):  # noqa: BLE001 - never the class's comparison
            unread.append(e.student)
    try:
        compared = compare_class(sources, base).to_dict()
    except Exception as exc:  # noqa: BLE001 - a comparison must never cost the class its gradebook
        compared = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if unread:  # with those the comparison itself left out (too large, too deep), each with its reason
        compared["not_compared"] = sorted(set(unread) | set(compared.get("not_compared") or []))
    return compared
