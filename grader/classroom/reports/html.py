"""report.html: one self-contained page to grade from (inline CSS, JS and SVG; nothing fetched at view time).

Sections: a sortable table of students linking to each student's detail (every item, its message, which file
was graded), a score histogram, pass rates per item, each trap's meaning and who hit it, the sandbox and intake
flags, the skipped entries, and suspicious pairs with their shared functions side by side.
"""

from __future__ import annotations

import html
import math
import re

from grader.classroom.deadline import SIMILARITY_READ
from grader.classroom.reports.tables import exercise_scores
from grader.spec import catalogue

COLOURS = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "error": "#6a1b9a",
    "timeout": "#ef6c00",
    "not_attempted": "#bdbdbd",
}
FLAG_MEANING = {
    "error": "an item raised, or the sandbox stopped (crash, memory, blocked import)",
    "timeout": "an item ran past the time limit",
    "uses-autograd": "called autograd, which the exercise forbids",
    "private-internals": "reaches into private torch or interpreter internals (read from the source)",
    "ambiguous": "several different files could be the exercise; the one graded is named in the detail",
    "unreadable": "an exercise file could not be read or decoded",
    "stub": "an exercise file is the unmodified stub",
    "nothing": "no exercise file was found",
    "duplicate-id": "another Gradescope folder claims the same student id; both are graded apart, neither has a sid",
}

# the page may load nothing from anywhere: everything it needs is inline
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
NAV = "".join(
    f'<a href="#{a}">{a}</a>'
    for a in ("students", "histogram", "items", "traps", "flags", "skipped", "similarity", "details")
)
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #ddd;
vertical-align:top}th button{font:inherit;font-weight:bold;border:0;background:none;cursor:pointer;padding:0}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
.num{text-align:right}.st-passed{color:#2e7d32}.st-failed,.st-error{color:#c62828;font-weight:bold}
.st-timeout{color:#ef6c00;font-weight:bold}.st-not_attempted{color:#888}.flag{background:#fff3e0;border-radius:3px;
padding:0 4px;margin-right:3px;font-size:90%}pre{background:#f6f8fa;padding:6px;overflow:auto;font-size:85%;margin:0}
.side{display:grid;grid-template-columns:1fr 1fr;gap:8px}.student{border-top:2px solid #ccc;margin-top:1.5em}
nav a{margin-right:1em}pre mark.shared{background:#fff59d}
"""

SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    var button = th.querySelector('button');
    if (!button) return;
    button.addEventListener('click', function () {
      var asc = th.getAttribute('aria-sort') !== 'ascending';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var numeric = th.hasAttribute('data-num');
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-value'), y = b.cells[col].getAttribute('data-value');
        var d = numeric ? parseFloat(x) - parseFloat(y) : (x < y ? -1 : x > y ? 1 : 0);
        if (d === 0) d = a.rowIndex - b.rowIndex;
        return asc ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|\Z)")  # a line as Python counts them, as similarity.py numbers them


def _marked(code: str, lines) -> str:
    """Return code escaped for a <pre>, the given lines (from 1) in <mark class="shared">."""
    marked, out = set(lines or ()), []
    for k, m in enumerate(_LINE.finditer(code), 1):
        if not m.group(0):
            break
        text, end = m.groups()
        out.append((f'<mark class="shared">{_e(text)}</mark>' if k in marked and text else _e(text)) + _e(end))
    return "".join(out)


def _num(x) -> str:
    return f"{x:g}"


def _anchors(students: dict) -> dict[str, str]:
    return {s: f"s{i}" for i, s in enumerate(sorted(students))}


def _link(student: str, anchors: dict) -> str:
    if student in anchors:
        return f'<a href="#{anchors[student]}">{_e(student)}</a>'
    return _e(student)


def _links(names, anchors) -> str:
    return ", ".join(_link(s, anchors) for s in names) or "none"


def _student_flags(r: dict) -> list[str]:
    flags = set(r.get("intake_flags") or [])
    for item in r["items"]:
        if item["status"] in ("error", "timeout"):
            flags.add(item["status"])
        flags.update(t for t in item["traps"] if t in FLAG_MEANING)
    if (r.get("flags") or {}).get("private_internals"):
        flags.add("private-internals")
    return sorted(flags)


def _students_table(students: dict, anchors: dict) -> str:
    head = [("student", False), ("name", False), ("score", True)] + [(ex, True) for ex in catalogue.EXERCISES]
    head.append(("flags", False))
    ths = "".join(f'<th{" data-num" if num else ""}><button type="button">{_e(h)}</button></th>' for h, num in head)
    rows = []
    for s in sorted(students):
        r = students[s]
        name = (r.get("identity") or {}).get("name", "")
        flags = _student_flags(r)
        cells = [
            f'<td data-value="{_e(s)}">{_link(s, anchors)}</td>',
            f'<td data-value="{_e(name)}">{_e(name)}</td>',
            f'<td class="num" data-value="{_num(r["score"])}">{_num(r["score"])}/{_num(r["max_score"])}</td>',
        ]
        cells += [f'<td class="num" data-value="{_num(v)}">{_num(v)}</td>' for v in exercise_scores(r).values()]
        cells.append(
            f'<td data-value="{_e(" ".join(flags))}">'
            + "".join(f'<span class="flag">{_e(f)}</span>' for f in flags)
            + "</td>"
        )
        rows.append(f'<tr data-student="{_e(s)}">{"".join(cells)}</tr>')
    body = "".join(rows)
    return f'<table class="sortable" id="student-table"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>'


def _histogram(students: dict, max_score: float) -> str:
    scores = [students[s]["score"] for s in sorted(students)]
    width = max(1, math.ceil((max_score + 1) / 22))
    bins = [0] * (int(max_score // width) + 1)
    for x in scores:
        bins[min(int(x // width), len(bins) - 1)] += 1
    top = max(bins + [1])
    bar_w, h = 44, 160
    parts = []
    for k, count in enumerate(bins):
        lo, hi = k * width, min(max_score, (k + 1) * width - 1)
        label = _num(lo) if width == 1 else f"{_num(lo)}-{_num(hi)}"
        bh = h * count / top
        x = 30 + k * bar_w
        parts.append(
            f'<rect class="bin" data-bin="{_e(label)}" data-count="{count}" x="{x}" y="{16 + h - bh:.1f}" '
            f'width="{bar_w - 4}" height="{bh:.1f}" fill="#1565c0"><title>score {_e(label)}: {count}</title></rect>'
        )
        if count:
            parts.append(f'<text x="{x + 4}" y="{12 + h - bh:.1f}" font-size="11">{count}</text>')
        parts.append(f'<text x="{x}" y="{h + 30}" font-size="10">{_e(label)}</text>')
    w = 40 + bar_w * len(bins)
    return (
        f'<svg id="histogram-svg" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" role="img" '
        f'aria-label="score histogram">{"".join(parts)}</svg>'
    )


def _pass_rates(summary: dict) -> str:
    n = max(summary["students"], 1)
    rows, bar_w, row_h = [], 420, 18
    for k, (item, counts) in enumerate(summary["items"].items()):
        y, x = k * row_h, 0.0
        rows.append(f'<text x="0" y="{y + 13}" font-size="12">{_e(item)}</text>')
        for status, colour in COLOURS.items():
            w = bar_w * counts.get(status, 0) / n
            if w:
                rows.append(
                    f'<rect x="{150 + x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                    f'fill="{colour}"><title>{status}: {counts[status]}</title></rect>'
                )
            x += w
        rate = 100 * counts.get("passed", 0) / n
        rows.append(f'<text x="{160 + bar_w}" y="{y + 13}" font-size="12">{rate:.0f}% passed</text>')
    height = row_h * len(summary["items"]) + 4
    legend = " ".join(f'<span style="color:{c}">&#9632; {s.replace("_", " ")}</span>' for s, c in COLOURS.items())
    return f'<p>{legend}</p><svg xmlns="http://www.w3.org/2000/svg" width="660" height="{height}">{"".join(rows)}</svg>'


def _traps(summary: dict, anchors: dict) -> str:
    from grader.grading import traps

    n = max(summary["students"], 1)
    rows = []
    for t, count in summary["traps"].items():
        meaning = traps.TRAPS[t].concept if t in traps.TRAPS else ""
        who = _links(summary["trap_students"].get(t, []), anchors)
        rows.append(
            f'<tr id="trap-{_e(t)}"><td><code>{_e(t)}</code></td><td>{_e(meaning)}</td>'
            f'<td class="num">{count} ({100 * count / n:.0f}%)</td><td>{who}</td></tr>'
        )
    body = "".join(rows) or '<tr><td colspan="4">no traps hit</td></tr>'
    head = "<tr><th>trap</th><th>what it means</th><th>students</th><th>who</th></tr>"
    return f'<table id="trap-table">{head}{body}</table>'


def _flags(summary: dict, anchors: dict) -> str:
    rows = []
    groups = [("sandbox", summary.get("sandbox_flags") or {}), ("intake", summary.get("intake_flags") or {})]
    for source, flags in groups:
        for flag, who in flags.items():
            rows.append(
                f'<tr data-flag="{_e(flag)}"><td>{source}</td><td><code>{_e(flag)}</code></td>'
                f"<td>{_e(FLAG_MEANING.get(flag, ''))}</td><td>{_links(who, anchors)}</td></tr>"
            )
    head = "<tr><th>from</th><th>flag</th><th>meaning</th><th>students</th></tr>"
    return f'<table id="flag-table">{head}{"".join(rows)}</table>'


def _skipped(summary: dict) -> str:
    skipped = summary.get("skipped") or []
    stale = summary.get("stale_removed") or []
    rows = "".join(f"<tr><td><code>{_e(s['name'])}</code></td><td>{_e(s['reason'])}</td></tr>" for s in skipped)
    out = f'<table id="skipped-table"><tr><th>entry</th><th>why it was not graded</th></tr>{rows}</table>'
    if not skipped:
        out = "<p>Every entry of the submissions folder was graded.</p>"
    if stale:
        out += f"<p>Removed stale results of students no longer in the folder: {_e(', '.join(stale))}.</p>"
    return out


def _similarity(summary: dict, anchors: dict) -> str:
    sim = summary.get("similarity")
    if sim is None:
        return "<p>Not run (--no-similarity).</p>"
    reasons = sim.get("not_compared_reasons") or {}
    left_out = sorted(set(sim.get("not_compared") or []) | set(reasons))
    slow = f"its files took longer than {SIMILARITY_READ:g} s to read"
    note = (
        '<p id="not-compared">Not compared: '
        + "; ".join(f"{_link(s, anchors)} ({_e(reasons.get(s, slow))})" for s in left_out)
        + ".</p>"
        if left_out
        else ""
    )
    if "error" in sim:
        return f"<p>The similarity check could not finish: {_e(sim['error'])}</p>" + note
    base = (sim.get("settings") or {}).get("base") or []
    removed = "stub text" + (f", the course's base code ({_e(', '.join(base))})" if base else "")
    intro = note + (
        f"<p>{sim['compared_pairs']} pairs compared with copydetect, function by function, {removed} and "
        f"fingerprints common to the class removed; highest pair score {sim['max_pair_score']}; pairs at or above "
        f"{sim['settings']['threshold']} are listed.</p>"
    )
    if not sim["pairs"]:
        return intro + "<p>No suspicious pair.</p>"
    groups = "".join(f"<li>{_links(g, anchors)}</li>" for g in sim.get("groups") or [])
    blocks = [
        f'<p>Groups of students linked by the pairs below:</p><ul id="similar-groups">{groups}</ul>'
        '<p>In each function shown side by side, the <mark class="shared">marked lines</mark> hold code the two '
        "share.</p>"
    ]
    for p in sim["pairs"]:
        funcs = "".join(
            f'<h4>{_e(f["function"])}: {f["similarity"]:.0%}</h4><div class="side">'
            f"<pre>{_marked(f['code_a'], f.get('lines_a'))}</pre><pre>{_marked(f['code_b'], f.get('lines_b'))}</pre>"
            "</div>"
            for f in p["functions"]
        )
        blocks.append(
            f'<div class="pair"><h3>{_link(p["a"], anchors)} and {_link(p["b"], anchors)}: score '
            f"{p['score']:.2f}</h3><details><summary>{len(p['functions'])} shared functions side by side"
            f"</summary>{funcs}</details></div>"
        )
    return intro + "".join(blocks)


def _detail(s: str, r: dict, anchor: str) -> str:
    ident = r.get("identity") or {}
    who = ", ".join(f"{k}: {_e(v)}" for k, v in sorted(ident.items()))
    graded = r.get("graded_files") or {}
    files = "".join(f"<li>{_e(ex)}: <code>{_e(f)}</code></li>" for ex, f in sorted(graded.items())) or "<li>none</li>"
    notes = "".join(f"<li>{_e(n)}</li>" for n in r.get("notes") or [])
    private = "".join(
        f"<li>{_e(f.get('exercise'))} line {_e(f.get('line'))}: {_e(f.get('what'))}: "
        f"<code>{_e(f.get('code'))}</code></li>"
        for f in (r.get("flags") or {}).get("private_internals") or []
    )
    rows = "".join(
        f'<tr><td>{_e(i["id"])}</td><td class="st-{_e(i["status"])}">{_e(i["status"])}</td>'
        f'<td class="num">{_num(i["score"])}/{_num(i["max_score"])}</td><td>{_e(", ".join(i["traps"]))}</td>'
        f"<td>{_e(i['message'])}</td></tr>"
        for i in r["items"]
    )
    return (
        f'<section class="student" id="{anchor}" data-student="{_e(s)}"><h3>{_e(s)}: '
        f"{_num(r['score'])}/{_num(r['max_score'])}</h3>"
        + (f"<p>{who}</p>" if who else "")
        + f'<p>Graded files:</p><ul class="graded-files">{files}</ul>'
        + (f"<p>Intake notes:</p><ul>{notes}</ul>" if notes else "")
        + (f'<p>Reaches into internals:</p><ul class="private">{private}</ul>' if private else "")
        + f"<table><tr><th>item</th><th>status</th><th>score</th><th>traps</th><th>message</th></tr>{rows}</table>"
        + '<p><a href="#students">back to the table</a></p></section>'
    )


def html_report(summary: dict, students: dict | None = None) -> str:
    """Return report.html: everything above in one self-contained page."""
    students = students or {}
    anchors = _anchors(students)
    s = summary["score"]
    details = "".join(_detail(st, students[st], anchors[st]) for st in sorted(students))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>backprop-ninja class report</title>
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<style>{STYLE}</style>
</head><body>
<h1>Class report</h1>
<p id="headline">{summary["students"]} submissions; score mean {s["mean"]}, median {s["median"]},
range {s["min"]}-{s["max"]} of {summary["max_score"]}.</p>
<nav>{NAV}</nav>
<h2 id="students">Students</h2><p>Click a column heading to sort; click a student for every item.</p>
{_students_table(students, anchors)}
<h2 id="histogram">Score histogram</h2>
{_histogram(students, summary["max_score"])}
<h2 id="items">Pass rate per item</h2>
{_pass_rates(summary)}
<h2 id="traps">Traps: what each means and who hit it</h2>
{_traps(summary, anchors)}
<h2 id="flags">Flags</h2>
{_flags(summary, anchors)}
<h2 id="skipped">Skipped entries</h2>
{_skipped(summary)}
<h2 id="similarity">Similar submissions</h2>
{_similarity(summary, anchors)}
<h2 id="details">Every student</h2>
{details}
<script>{SCRIPT}</script>
</body></html>
"""
