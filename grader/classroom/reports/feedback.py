"""A feedback file per student, ready to hand back: feedback/<student>.md, Markdown, from students/<student>.json.

What it says is what the student's own `grade all` table says (show/table.py), at the course's message level: the
messages are the ones already in the student's JSON, rendered at that level; nothing here adds a hint, a formula or
a trap's explanation. It leaves out what is for the instructor only: intake notes that name other students or
sources (duplicate-id, id-collision, Gradescope's folder and metadata, Canvas's late mark), the identity, the
similarity check. Lateness is left out too, unless course.toml's [late] took points off: then the file says so,
with the fraction, the points and the score before the penalty. The flag lines for reaching into internals or
differentiating numerically are kept: the table ends with the same lines ("flagged for your instructor (no points
change)"), so a student sees them there anyway.

Every text that can carry a student's words (a file name, an exception's message, a line of their code) is escaped:
terminal controls shown as escapes, Markdown and HTML punctuation backslash-escaped outside code spans, so a
rendered file shows the text as written and nothing else.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from grader.grading.scan import flagged_note, numeric_note
from grader.show.table import visible
from grader.submissions.intake import messages as msg
from grader.submissions.intake.finding import _safe_id, shown

FOLDER = "feedback"
STATUS = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "timeout": "timed out",
    "not_attempted": "not attempted",
}
# intake notes for the instructor only: they name other students, sources or ids (intake/finding.py writes them)
INSTRUCTOR_NOTES = (
    msg.DUPLICATE_ID,
    msg.ID_COLLISION,
    msg.CANVAS_LATE,
    msg.SUBMITTED_AT,
    msg.NOT_IN_METADATA,
    "Gradescope folder {name}",
)
NOT_GRADED = (
    "Your submission could not be graded this time: the grader itself failed on it, not your code. It will be "
    "graded again; until then there is no score."
)

_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)  # a code span: what Markdown shows as written
_PUNCTUATION = re.compile(r"([\\`*\[\]<>|~&!#])")  # escaped outside code spans
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # an _ not inside a word (requires_grad stays as is)
_LEADING = re.compile(r"^(\s*)(?:([-+=>])|(\d+)([.)]))")  # a line that would start a list, a heading or a quote


def _template(text: str) -> re.Pattern:
    """Return a pattern matching the sentences a message template writes, whatever fills its fields."""
    parts = re.split(r"\{[a-z_]+\}", text)
    return re.compile("^" + "(?s:.*)".join(re.escape(p) for p in parts) + "$")


_INSTRUCTOR_ONLY = tuple(_template(t) for t in INSTRUCTOR_NOTES)


def student_notes(notes) -> list[str]:
    """Return the intake notes a student may read: the ones about their own files, without instructor-only ones."""
    return [n for n in notes or [] if isinstance(n, str) and not any(p.match(n) for p in _INSTRUCTOR_ONLY)]


def _escape(text: str) -> str:
    return _UNDERSCORE.sub(r"\\_", _PUNCTUATION.sub(r"\\\1", text))


def md(text: str) -> str:
    """Return text as Markdown that renders it as written: code spans kept, other punctuation escaped."""
    return _md(str(text))


@functools.lru_cache(maxsize=4096)  # a class's files say the same messages, item ids and statuses again and again
def _md(text: str) -> str:
    text = visible(shown(text))
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out.append(_escape(text[pos : m.start()]))
        out.append(m.group(0).replace("\n", " "))
        pos = m.end()
    out.append(_escape(text[pos:]))
    lines = "".join(out).splitlines() or [""]
    return "\n  ".join(_LEADING.sub(_lead, line).rstrip() for line in lines)


def _lead(m: re.Match) -> str:
    """Escape what would make a line a list item, a heading's underline or a quote: `\\-`, `1\\.`."""
    if m.group(2):
        return f"{m.group(1)}\\{m.group(2)}"
    return f"{m.group(1)}{m.group(3)}\\{m.group(4)}"


def code(text: str) -> str:
    """Return text as one Markdown code span (a name: a student's key, an item id), shown exactly as written."""
    return _code(str(text))


@functools.lru_cache(maxsize=4096)
def _code(text: str) -> str:
    text = visible(shown(text)).replace("\n", " ").replace("|", "\\|")  # a table cell ends at any |
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def file_name(student: str) -> str:
    """Return the feedback file's name: the student's key, as students/<key>.json has it, and `.md`.

    Keys come from intake already safe as file names (discover._safe_id); the same rule again leaves them as they
    are, and makes any other key (a caller's own) a legal name that stays in the folder.
    """
    return f"{_safe_id(student, 'student')}.md"


def _num(x) -> str:
    return f"{float(x):g}"


def _maxdiff(value) -> str:
    if value is None:
        return "-"
    return f"{float(value):.2e}" if value else "0"


def _shape(item: dict) -> str:
    shape, expected = item.get("shape"), item.get("expected_shape")
    if shape is None:
        return "-"
    if expected is not None and list(shape) != list(expected):
        return f"{list(shape)}, expected {list(expected)}"
    return str(list(shape))


def _shown(item: dict) -> bool:
    """Whether the table prints an item's message under it: not passed, or a trap to say."""
    return bool(item.get("message")) and (item.get("status") not in ("passed", "not_attempted") or item.get("traps"))


def _counts(items: list[dict]) -> str:
    counts: dict[str, int] = {}
    for item in items:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    return ", ".join(f"{counts[s]} {STATUS[s]}" for s in STATUS if counts.get(s))


def late_line(penalty: dict) -> str:
    """Return the sentence that states a late penalty: how late, the fraction, the points and the score before it."""
    days = penalty.get("days_late")
    when = f"{days} day{'s' if days != 1 else ''} late" if days else "late"
    fraction = f"{100 * float(penalty['fraction']):g}%"
    return (
        f"Late penalty: submitted {when}, so {fraction} of the score is taken off: {_num(penalty['points'])} points "
        f"(the score before the penalty is {_num(penalty['raw_score'])})."
    )


def feedback(student: str, result: dict) -> str:
    """Return one student's feedback as Markdown."""
    items = result.get("items") or []
    failed = bool(result.get("grader_failed"))
    lines = [f"# Backprop ninja: feedback for {code(student)}", ""]
    if failed:
        lines += [NOT_GRADED, ""]
    else:
        lines += [f"Score: **{_num(result['score'])} / {_num(result['max_score'])}** ({_counts(items)})", ""]
        if result.get("late_penalty"):  # course.toml's [late] took points off: the student is told how many, and why
            lines += [late_line(result["late_penalty"]), ""]
    problems = [p for p in result.get("problems") or [] if p.get("message")]
    covered: dict[str, str] = {}
    if problems and not failed:
        lines += ["## Whole files", ""]
        for p in problems:
            n = len(p.get("items") or [])
            status = STATUS.get(p.get("status"), str(p.get("status")))
            what = f"{n} item{'s' if n != 1 else ''} {status}"
            lines.append(f"- {code(p.get('file', '?'))} ({what}): {md(p['message'])}")
            covered.update((i, p["message"]) for i in p.get("items") or [])
        lines.append("")
    lines += ["| item | status | points | maxdiff | shape |", "|---|---|---|---|---|"]
    for item in items:
        points = "-" if failed else f"{_num(item['score'])}/{_num(item['max_score'])}"
        status = STATUS.get(item["status"], md(item["status"]))
        lines.append(f"| {code(item['id'])} | {status} | {points} | {_maxdiff(item.get('maxdiff'))} | {_shape(item)} |")
    lines.append("")
    said = [i for i in items if _shown(i) and covered.get(i["id"]) != i["message"]] if not failed else []
    if said:
        lines += ["## What to look at", ""]
        for item in said:
            status = STATUS.get(item["status"], md(item["status"]))
            lines.append(f"- {code(item['id'])} ({status}): {md(item['message'])}")
        lines.append("")
    flags = result.get("flags") or {}
    flag_lines = [
        n
        for n in (
            flagged_note(flags.get("private_internals") or []),
            numeric_note(flags.get("numeric_differentiation") or []),
        )
        if n
    ]
    notes = student_notes(result.get("notes"))
    if notes or flag_lines:
        lines += ["## Notes", ""]
        lines += [f"- {md(n)}" for n in notes + flag_lines]
        lines.append("")
    return "\n".join(lines)


def write_feedback(out: Path, students: dict[str, dict]) -> list[str]:
    """Write out/feedback/<student>.md for every student, remove those of students gone; return the names written."""
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    names = {student: file_name(student) for student in sorted(students)}
    kept = set(names.values())
    for stale in sorted(folder.glob("*.md")):
        if stale.name not in kept:
            stale.unlink()
    try:
        for student, name in names.items():
            (folder / name).write_text(feedback(student, students[student]), encoding="utf-8")
    finally:  # what the students' files said is held no longer than it takes to write them
        _md.cache_clear()
        _code.cache_clear()
    return sorted(names.values())
