"""Everything the grader prints: the cmp-style table, messages, JSON, and the progress line."""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
import time

import click

from grader.grading.results import SubmissionResult
from grader.grading.scan import flagged_note, numeric_note

_STYLE = {
    "passed": {"fg": "green"},
    "failed": {"fg": "red", "bold": True},
    "error": {"fg": "red", "bold": True},
    "timeout": {"fg": "yellow", "bold": True},
    "not_attempted": {"dim": True},
}
_LABEL = {"passed": "passed", "failed": "FAILED", "error": "ERROR", "timeout": "TIMEOUT", "not_attempted": "todo"}


# Terminal controls a student's text may carry (their output, an exception's message, a file or folder name):
# escape sequences that rewrite rows, set the clipboard (OSC 52) or hide links, a carriage return that overwrites
# a line, and the bidi overrides that reorder what is shown. Printed as visible escapes instead.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """Return text with every terminal control character shown as an escape (\\x1b), newlines and tabs kept."""
    return _CONTROLS.sub(_escaped, text)


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cmp_cell(value) -> str:
    """Return one cell of the cmp() columns (exact, approx, maxdiff): '-' when there is no value."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    return f"{value:.2e}" if value else "0"


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(visible(text), width - len(indent), initial_indent=indent, subsequent_indent=indent)


def _printed(output: str, width: int, indent: str) -> list[str]:
    """Return the last lines a student's code printed, for the table."""
    tail = visible(output.strip()).splitlines()[-3:]
    return [f"{indent}it printed: " + t[: width - 20] for t in tail]


def problems(result: SubmissionResult, width: int = 100) -> list[str]:
    """Return the lines that say once, above the table, what failed for a whole file or call."""
    lines = []
    for p in result.problems:
        n = len(p["items"])
        what = f"{p['file']} ({n} item{'s' if n != 1 else ''} {_LABEL[p['status']]})"
        lines += _wrap(f"{what}: {p['message']}", width, "")
        if p.get("output", "").strip():
            lines += _printed(p["output"], width, "    ")
    return lines + ([""] if lines else [])


def points_note(result: SubmissionResult) -> str:
    """Explain the points column when items are not all worth the same, or '' when they are."""
    worth: dict[float, list[str]] = {}
    for item in result.items:
        worth.setdefault(item.max_score, []).append(item.id)
    if len(worth) <= 1:
        return ""
    common = max(worth, key=lambda k: len(worth[k]))
    others = ", ".join(f"{', '.join(ids)} ({k:g})" for k, ids in sorted(worth.items()) if k != common)
    return f"points: an item scores its points only when it passes; each is worth {common:g} except {others}."


def table(result: SubmissionResult, *, hints: bool = False, color: bool | None = None) -> str:
    """Render a submission like the lecture's cmp() lines, with a message under each failure."""
    color = (sys.stdout is not None and sys.stdout.isatty()) if color is None else color  # None: fd 1 closed
    width = min(shutil.get_terminal_size((100, 20)).columns, 110)
    idw = max([len(i.id) for i in result.items] + [4])
    lines = problems(result, width)
    lines.append(f"{'item':<{idw}}  {'status':<8} {'points':<6} {'exact':<6} {'approx':<6} {'maxdiff':<9} traps")
    for item in result.items:
        label = f"{_LABEL[item.status]:<8}"
        if color:
            label = click.style(label, **_STYLE[item.status])
        traps = ", ".join(item.traps)
        pts = f"{item.score:g}/{item.max_score:g}"
        lines.append(
            f"{item.id:<{idw}}  {label} {pts:<6} {cmp_cell(item.exact):<6} {cmp_cell(item.approx):<6} "
            f"{cmp_cell(item.maxdiff):<9} {traps}".rstrip()
        )
        if item.scope != "item":
            continue  # said once above the table
        show = item.message and (item.status not in ("passed", "not_attempted") or item.traps)
        if show:
            lines += _wrap(item.message, width - 2, "    ")
        if item.output.strip() and item.status in ("failed", "error", "timeout"):
            lines += _printed(item.output, width, "    ")
        if hints and item.hints:
            for hint in item.hints:
                lines += _wrap("why: " + hint, width - 2, "      ")
    lines.append("")
    lines.append(summary_line(result, color=color))
    note_line = points_note(result)
    if note_line:
        lines += _wrap(note_line, width, "")
    flags = result.extra.get("flags") or {}
    for note in (
        flagged_note(flags.get("private_internals") or []),
        numeric_note(flags.get("numeric_differentiation") or []),
    ):
        if note:
            lines += _wrap(note, width, "")
    return "\n".join(lines)


# The score line counts items in this order, whatever order they were graded in: passed, failed, errors, timed
# out, not attempted. {status: (word for one, word for several)}
SUMMARY_COUNTS = {
    "passed": ("passed", "passed"),
    "failed": ("failed", "failed"),
    "error": ("error", "errors"),
    "timeout": ("timed out", "timed out"),
    "not_attempted": ("not attempted", "not attempted"),
}


def summary_line(result: SubmissionResult, *, color: bool = False) -> str:
    """Return the final score line: the score, then how many items ended in each status (SUMMARY_COUNTS's order)."""
    counts: dict[str, int] = {}
    for item in result.items:
        counts[item.status] = counts.get(item.status, 0) + 1
    parts = [f"{counts[s]} {words[counts[s] != 1]}" for s, words in SUMMARY_COUNTS.items() if counts.get(s)]
    line = f"score {result.score:g}/{result.max_score:g}: " + ", ".join(parts)
    if color:
        line = click.style(line, fg="green" if result.passed else "red", bold=True)
    return line


def emit_table(result: SubmissionResult, *, hints: bool = False):
    """Print the table to stdout."""
    click.echo(table(result, hints=hints))


def emit_json(obj):
    """Print one JSON object on stdout and nothing else."""
    click.echo(json.dumps(obj, indent=2))


def note(message: str):
    """Print a side remark to stderr."""
    click.echo(visible(message), err=True)


class Progress:
    """A progress bar with ETA on a terminal; otherwise a log line with the rate and ETA, at most every LOG_EVERY
    seconds (and for the first and last unit), so a log or CI shows steady progress whatever the class size."""

    LOG_EVERY = 10.0  # seconds between log lines without a terminal

    def __init__(self, total: int, label: str = "grading", stream=None, clock=time.monotonic):
        self.total, self.done, self.label = total, 0, label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.clock = clock
        self.started = self.last = clock()
        self._bar = None
        if self.tty:
            self._bar = click.progressbar(length=total, label=label, file=self.stream, show_eta=True, show_pos=True)
            self._bar.__enter__()

    def advance(self, what: str = ""):
        """Count one finished unit of work."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
            return
        now = self.clock()
        if not self.total or (self.done not in (1, self.total) and now - self.last < self.LOG_EVERY):
            return
        self.last = now
        click.echo(
            visible(f"{self.label}: {self.done}/{self.total} {what}".rstrip() + self._pace(now)), file=self.stream
        )

    def _pace(self, now: float) -> str:
        """Return ' (R per s, about S s left)' from the pace so far ('' before there is any)."""
        spent = now - self.started
        if spent <= 0 or self.done >= self.total:
            return f" (done in {spent:.0f} s)" if self.done >= self.total and spent > 0 else ""
        rate = self.done / spent
        return f" ({rate:.1f} per s, about {(self.total - self.done) / rate:.0f} s left)"

    def close(self):
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def batch_line(summary: dict, out) -> str:
    """Return the one-line outcome of a batch run."""
    s = summary["score"]
    flagged = len(set(summary["errored"]) | set(summary["timed_out"]))
    return (
        f"graded {summary['students']} submissions into {out}: mean {s['mean']}/{summary['max_score']}, "
        f"{flagged} with errors or timeouts; see gradebook.csv, summary.json and report.html"
    )
