"""The code each student was graded on, read again for report.html: bounded, and never in students/<id>.json.

Results carry no source text (students/<id>.json, the gradebook and what goes to an LMS stay as they are), so the
report reads each student's entry again with intake's own rule (`read_entry`: the same files give the same
`Source`, a notebook's converted code with its cell labels included) once grading is over. It checks first that the
files are still those that were graded (the `--resume` digest); a student whose files changed, or whose files take
too long to read, gets a sentence instead of code. This runs in a throwaway child of the scheduler (see
`reports.write_report`): the scheduler, whose memory every grading process inherits, never holds a student's code.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.classroom import deadline

MAX_FILE_BYTES = 64 << 10  # of one exercise's code (UTF-8); cut at a line's end past it
MAX_STUDENT_BYTES = 256 << 10  # of one student's code in all; the exercises past it are named, not shown
READ_SECONDS = deadline.SIMILARITY_READ  # one student's files, as the similarity check allows

CHANGED = "not shown: the files changed after they were graded (grade again to see what is graded now)"
UNREAD = "not shown: the files could not be read again ({why})"
OVER_STUDENT = f"not shown: the report shows at most {MAX_STUDENT_BYTES >> 10} KB of a student's code"


@dataclass(frozen=True)
class Shown:
    """One exercise's graded code as the report shows it."""

    exercise: str
    label: str  # as graded_files names it: 'ex1.py', 'hw.ipynb cells 5, 7'
    text: str = ""  # the code graded, cut at MAX_FILE_BYTES
    line_map: tuple[str, ...] = ()  # where each line came from ('cell 12, line 3'), for a notebook
    truncated: int = 0  # lines left out at the end (0: the whole text)
    omitted: str = ""  # why no text is shown at all


@dataclass(frozen=True)
class StudentCode:
    """What the report shows of one student's code: the exercises graded, or why none is shown."""

    exercises: tuple[Shown, ...] = ()
    note: str = ""


def _cut(text: str, limit: int) -> tuple[str, int]:
    """Return text cut at the last line end within limit bytes of UTF-8, and how many lines were left out."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, 0
    head = data[:limit].decode("utf-8", "ignore")
    end = head.rfind("\n")
    head = head[: end + 1] if end >= 0 else head
    return head, text.count("\n", len(head)) + (0 if text.endswith("\n") else 1)


def shown(sources: dict) -> tuple[Shown, ...]:
    """Return a submission's sources ({exercise: Source}) bounded for the report: MAX_FILE_BYTES each,
    MAX_STUDENT_BYTES in all."""
    out, left = [], MAX_STUDENT_BYTES
    for ex in sorted(sources):
        src = sources[ex]
        label = src.label or src.path
        if left <= 0:
            out.append(Shown(ex, label, omitted=OVER_STUDENT))
            continue
        limit = min(MAX_FILE_BYTES, left)
        text, cut = _cut(src.text, limit)
        left = 0 if cut and limit < MAX_FILE_BYTES else left - len(text.encode("utf-8", "surrogatepass"))
        out.append(Shown(ex, label, text, tuple(src.line_map[: text.count("\n") + 1]), cut))
    return tuple(out)


def graded_sources(entries, digests: dict[str, str] | None = None, options: str = "") -> dict[str, StudentCode]:
    """Read every entry's graded code again; return {student: StudentCode}.

    digests: {student: the entry's digest when it was graded} (with options, the string it was computed with); a
    student whose files no longer give it is shown a sentence, not code that was never graded.
    """
    from grader.submissions.intake import read_entry

    out = {}
    for e in entries:
        try:
            with deadline.overall(READ_SECONDS):
                gathered = e.gather()  # read once: the files checked against the digest are the files shown
                if digests is not None and e.student in digests and e.digest(options, gathered) != digests[e.student]:
                    out[e.student] = StudentCode(note=CHANGED)
                    continue
                out[e.student] = StudentCode(shown(read_entry(e, gathered).sources))
        except (Exception, deadline.GradingTooLong) as exc:  # noqa: BLE001 - one student, never the report
            out[e.student] = StudentCode(note=UNREAD.format(why=f"{type(exc).__name__}: {exc}"[:200]))
    return out
