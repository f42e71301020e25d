"""How check() shows a result: an HTML table in a notebook, the text table in a terminal.

Both have the terminal table's columns, points included, and say a whole exercise's problem once, above.
"""

from __future__ import annotations

import html

from grader.grading.results import SubmissionResult
from grader.show import table as report

_COLOR = {"passed": "#1a7f37", "failed": "#cf222e", "error": "#cf222e", "timeout": "#9a6700", "not_attempted": "#777"}
_LABEL = {"passed": "passed", "failed": "FAILED", "error": "ERROR", "timeout": "TIMEOUT", "not_attempted": "todo"}
_CELL = "padding:2px 8px;text-align:left;vertical-align:top"


class CheckReport:
    """A graded result that IPython renders as HTML in a notebook and as text in a terminal."""

    def __init__(self, result: SubmissionResult, notes: list[str]):
        self.result = result
        self.notes = list(notes)

    def __repr__(self) -> str:
        lines = [report.table(self.result, color=False)]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self) -> str:
        columns = ("item", "status", "points", "exact", "approx", "maxdiff", "traps")
        head = "".join(f"<th style='{_CELL}'>{h}</th>" for h in columns)
        rows = []
        for item in self.result.items:
            color = _COLOR.get(item.status, "inherit")
            cells = [
                f"<code>{html.escape(item.id)}</code>",
                f"<b style='color:{color}'>{_LABEL.get(item.status, item.status)}</b>",
                f"{item.score:g}/{item.max_score:g}",
                report.cmp_cell(item.exact),
                report.cmp_cell(item.approx),
                report.cmp_cell(item.maxdiff),
                html.escape(", ".join(item.traps)),
            ]
            rows.append("<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in cells) + "</tr>")
            shown = item.status not in ("passed", "not_attempted") or item.traps
            if item.message and shown and item.scope == "item":  # a whole exercise's problem is said once, above
                text = html.escape(item.message)
                rows.append(
                    f"<tr><td></td><td colspan='{len(columns) - 1}' style='{_CELL};color:#555'>{text}</td></tr>"
                )
        problems = "".join(
            f"<p style='margin:2px 0'><b>{html.escape(p['file'])}</b> ({len(p['items'])} "
            f"item{'s' if len(p['items']) != 1 else ''} {_LABEL.get(p['status'], p['status'])}): "
            f"{html.escape(p['message'])}</p>"
            for p in self.result.problems
        )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        summary = html.escape(report.summary_line(self.result))
        points = report.points_note(self.result)
        return (
            problems + f"<table style='border-collapse:collapse;font-size:90%'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table><p><b>{summary}</b></p>"
            + (f"<p style='font-size:85%;color:#555'>{html.escape(points)}</p>" if points else "")
            + (f"<ul style='font-size:85%;color:#555'>{notes}</ul>" if notes else "")
        )
