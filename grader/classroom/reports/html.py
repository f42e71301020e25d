"""report.html: one self-contained page to grade from (inline CSS, JS and SVG; nothing fetched at view time).

Sections: a sortable table of students, filtered by a search box, linking to each student's detail (every item's
status, points, maxdiff, shape and message; the graded files, each with the code graded, folded, line-numbered and
bounded (sources.py), the lines its failing items' messages and its flags name marked; every marker: late and a
late penalty, similar pairs, intake flags, grader failed, numeric differentiation, private internals; the intake
notes, each once), a score histogram, pass rates per item each leading to the students who failed it, each trap's
meaning and who hit it, the sandbox and intake flags, the skipped entries, and suspicious pairs with their shared
functions side by side. Every piece of student text goes through _e: a student's code is text in a <pre>, never
markup, whatever it holds (`</script>`, `</details>`).
"""

from __future__ import annotations

import html
import math
import re

from grader.classroom.deadline import SIMILARITY_READ
from grader.classroom.reports.feedback import late_line
from grader.classroom.reports.sources import MAX_FILE_BYTES, MAX_STUDENT_BYTES, Shown, StudentCode
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
    "numeric-differentiation": "differentiates numerically (finite differences, complex step) instead of by hand",
    "grader-failed": "the grader itself could not finish this submission: no score (grade again with --resume)",
    "late": "Canvas marked the submission late",
    "late-penalty": "course.toml's [late] took points off: the score shown is after the penalty",
    "similar": "in a suspicious pair of the similarity check",
}
FAILING = ("failed", "error", "timeout")  # the statuses an item's "who failed it" list holds
NOTEBOOK_USED = re.compile(r"(ex\d+): graded from the notebook (.+)")

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
nav a{margin-right:1em}pre mark.shared{background:#fff59d}#items svg a text{fill:#1565c0;text-decoration:underline}
.markers li{margin:2px 0}.failing li{margin:2px 0}#student-search{font:inherit;padding:3px 6px;width:24em}
details.source{margin:2px 0}details.source summary{cursor:pointer}pre.code .ln::before{content:attr(data-n);
display:inline-block;width:3.5em;margin-right:1em;text-align:right;color:#888;user-select:none}
pre.code.nb .ln::before{content:attr(data-where);width:11em}pre.code .hl{background:#ffebee;display:inline-block;
min-width:100%}.code-note{color:#666;font-size:90%}
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
(function () {
  var box = document.getElementById('student-search'), table = document.getElementById('student-table');
  var count = document.getElementById('search-count');
  if (!box || !table) return;
  function filter() {
    var q = box.value.trim().toLowerCase(), shown = 0, rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var text = (r.getAttribute('data-student') + ' ' + r.textContent).toLowerCase();
      r.hidden = q !== '' && text.indexOf(q) < 0;
      if (!r.hidden) shown++;
    }
    count.textContent = q === '' ? '' : shown + ' of ' + rows.length + ' students match';
  }
  ['input', 'change', 'search'].forEach(function (e) { box.addEventListener(e, filter); });
  filter();
})();
(function () {
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) return;
    var opened = false;  // the target, or a line of code in a folded source: open every <details> around it
    for (var d = el.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) {
      if (!d.open) { d.open = true; opened = true; }
    }
    if (opened) el.scrollIntoView();
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
})();
"""


_SPECIAL = re.compile("[&<>\"']")  # what html.escape replaces: most texts of a report hold none


def _e(text) -> str:
    text = str(text)
    return html.escape(text, quote=True) if _SPECIAL.search(text) else text


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


def _similar_pairs(summary: dict) -> dict[str, list[dict]]:
    """Return student -> the suspicious pairs of the similarity check they are in."""
    out: dict[str, list[dict]] = {}
    for p in (summary.get("similarity") or {}).get("pairs") or []:
        out.setdefault(p["a"], []).append(p)
        out.setdefault(p["b"], []).append(p)
    return out


def _student_flags(r: dict, similar: bool = False) -> list[str]:
    flags = set(r.get("intake_flags") or [])
    if r.get("grader_failed"):
        flags.add("grader-failed")
    if (r.get("flags") or {}).get("numeric_differentiation"):
        flags.add("numeric-differentiation")
    if r.get("late") is True:
        flags.add("late")
    if r.get("late_penalty"):
        flags.add("late-penalty")
    if similar:
        flags.add("similar")
    for item in r["items"]:
        if item["status"] in ("error", "timeout"):
            flags.add(item["status"])
        flags.update(t for t in item["traps"] if t in FLAG_MEANING)
    if (r.get("flags") or {}).get("private_internals"):
        flags.add("private-internals")
    return sorted(flags)


def _students_table(students: dict, anchors: dict, similar: dict | None = None) -> str:
    head = [("student", False), ("name", False), ("score", True)] + [(ex, True) for ex in catalogue.EXERCISES]
    head.append(("flags", False))
    ths = "".join(f'<th{" data-num" if num else ""}><button type="button">{_e(h)}</button></th>' for h, num in head)
    rows = []
    for s in sorted(students):
        r = students[s]
        name = (r.get("identity") or {}).get("name", "")
        flags = _student_flags(r, s in (similar or {}))
        cells = [
            f'<td data-value="{_e(s)}">{_link(s, anchors)}</td>',
            f'<td data-value="{_e(name)}">{_e(name)}</td>',
            f'<td class="num" data-value="{_num(r["score"])}"{_raw_title(r)}>{_num(r["score"])}/{_num(r["max_score"])}'
            "</td>",
        ]
        cells += [f'<td class="num" data-value="{_num(v)}">{_num(v)}</td>' for v in exercise_scores(r).values()]
        cells.append(
            f'<td data-value="{_e(" ".join(flags))}">'
            + "".join(f'<span class="flag">{_e(f)}</span>' for f in flags)
            + "</td>"
        )
        rows.append(f'<tr data-student="{_e(s)}">{"".join(cells)}</tr>')
    body = "".join(rows)
    search = (
        '<p><label>Search: <input type="search" id="student-search" autocomplete="off" '
        'placeholder="id, name, flag or any text of a row"></label> <span id="search-count"></span></p>'
    )
    table = f'<table class="sortable" id="student-table"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>'
    return search + table


def _raw_title(r: dict) -> str:
    """Return a score cell's title when a late penalty made it: the score before the penalty."""
    penalty = r.get("late_penalty")
    if not penalty:
        return ""
    return f' title="{_num(penalty["raw_score"])} before the late penalty of {_num(penalty["points"])}"'


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


def _failing(summary: dict, students: dict) -> dict[str, list[tuple[str, str]]]:
    """Return item id -> [(student, status)] of those whose item failed, errored or timed out."""
    out: dict[str, list] = {item: [] for item in summary["items"]}
    for s in sorted(students):
        for i in students[s]["items"]:
            if i["status"] in FAILING:
                out.setdefault(i["id"], []).append((s, i["status"]))
    return out


def _pass_rates(summary: dict, failing: dict, item_anchors: dict) -> str:
    n = max(summary["students"], 1)
    rows, bar_w, row_h = [], 420, 18
    for k, (item, counts) in enumerate(summary["items"].items()):
        y, x = k * row_h, 0.0
        rows.append(
            f'<a class="item-link" href="#{item_anchors[item]}" data-item="{_e(item)}">'
            f"<title>who failed {_e(item)}: {len(failing.get(item, []))}</title>"
            f'<text x="0" y="{y + 13}" font-size="12">{_e(item)}</text>'
        )
        for status, colour in COLOURS.items():
            w = bar_w * counts.get(status, 0) / n
            if w:
                rows.append(
                    f'<rect x="{150 + x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                    f'fill="{colour}"><title>{status}: {counts[status]}</title></rect>'
                )
            x += w
        rate = 100 * counts.get("passed", 0) / n
        rows.append(f'<text x="{160 + bar_w}" y="{y + 13}" font-size="12">{rate:.0f}% passed</text></a>')
    height = row_h * len(summary["items"]) + 4
    legend = " ".join(f'<span style="color:{c}">&#9632; {s.replace("_", " ")}</span>' for s, c in COLOURS.items())
    return (
        f"<p>{legend}</p><p>Click an item for the students who failed it.</p>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="660" height="{height}">{"".join(rows)}</svg>'
    )


def _failing_lists(summary: dict, failing: dict, item_anchors: dict, anchors: dict) -> str:
    """Per item, a folded list of the students who failed it (failed, error or timeout), each a link."""
    blocks = []
    for item in summary["items"]:
        who = failing.get(item, [])
        lis = "".join(
            f'<li data-student="{_e(s)}">{_link(s, anchors)} <span class="st-{_e(st)}">{_e(st)}</span></li>'
            for s, st in who
        )
        body = f'<ul class="failing">{lis}</ul>' if who else "<p>Nobody failed it.</p>"
        blocks.append(
            f'<details id="{item_anchors[item]}" class="failed-item" data-item="{_e(item)}"><summary>'
            f"<code>{_e(item)}</code>: {len(who)} failed, errored or timed out</summary>{body}</details>"
        )
    return '<h3 id="who-failed">Who failed each item</h3>' + "".join(blocks)


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


def _shape(shape) -> str:
    if isinstance(shape, (list, tuple)):
        return "&times;".join(_e(d) for d in shape)
    return "" if shape is None else _e(shape)


def _maxdiff(x) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.3g}"
    return "" if x is None else _e(x)


def _notes(r: dict) -> list[str]:
    """The intake notes, each once: a notebook's "exN: graded from the notebook L" repeats its own note on L."""
    notes = list(dict.fromkeys(str(n) for n in r.get("notes") or []))
    out = []
    for n in notes:
        m = NOTEBOOK_USED.fullmatch(n)
        if m and any(o != n and f": {m[1]}: graded {m[2]}" in o for o in notes):
            continue
        out.append(n)
    return out


_CELL_LINE = re.compile(r"(?:cell \d+|In \[\d+\]), line \d+")  # how a message names a line of a notebook's code
_FILE_LINE = re.compile(r"\bline (\d+)\b")  # and of a file's


def _marks(r: dict, code: Shown) -> dict[int, list[str]]:
    """Return {line (from 1): why it is marked}: lines the messages of its failing items, or its flags, name."""
    ex, marks = code.exercise, {}
    where = {w: k for k, w in enumerate(code.line_map, 1) if w}
    for item in r.get("items") or []:
        if item.get("exercise") != ex or item.get("status") not in FAILING:
            continue
        message = str(item.get("message") or "")
        lines = [where.get(m) for m in _CELL_LINE.findall(message)] if where else []
        lines += [int(m) for m in _FILE_LINE.findall(_CELL_LINE.sub("", message))] if not where else []
        for k in lines:
            if k:
                marks.setdefault(k, []).append(f"{item.get('id')}: {item.get('status')}")
    for key, what in (("private_internals", "private internals"), ("numeric_differentiation", "numeric")):
        for f in (r.get("flags") or {}).get(key) or []:
            if isinstance(f, dict) and f.get("exercise") == ex and isinstance(f.get("line"), int):
                marks.setdefault(f["line"], []).append(f"{what}: {f.get('what')}")
    return marks


_LINE_END = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> list[str]:
    """Return text's lines as _LINE finds them (as Python counts them), without their ends."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":  # the text ends with a line end (or is empty): no line after it
        lines.pop()
    return lines


def _code(anchor: str, code: Shown, marks: dict[int, list[str]]) -> tuple[str, int]:
    """Return a graded exercise's code as a numbered <pre> (a notebook's lines numbered by cell), marks shown, and
    how many lines it has."""
    # escaped whole (escaping adds no line end and removes none): one escape per file rather than one per line
    lines = _lines(_e(code.text))
    if code.line_map:
        where = [_e(w) for w in code.line_map[: len(lines)]] + [""] * (len(lines) - len(code.line_map))
        attrs = [f' class="ln" data-n="{k}" data-where="{w}"' for k, w in enumerate(where, 1)]
    else:
        where = []
        attrs = [f' class="ln" data-n="{k}"' for k in range(1, len(lines) + 1)]
    for k in [k for k in range(1, len(lines) + 1) if k in marks] if marks else ():
        said = list(dict.fromkeys(marks[k]))  # a whole file's error names its line once per item: a few suffice
        why = "; ".join(said[:3]) + (f"; and {len(said) - 3} more" if len(said) > 3 else "")
        more = f' data-where="{where[k - 1]}"' if code.line_map else ""
        attrs[k - 1] = f' class="ln hl" id="{anchor}-{_e(code.exercise)}-L{k}" title="{_e(why)}" data-n="{k}"{more}'
    rows = "".join([f"<span{a}>{line}</span>\n" for a, line in zip(attrs, lines, strict=True)])
    return f'<pre class="code{" nb" if code.line_map else ""}">{rows}</pre>', len(lines)


def _sources(r: dict, anchor: str = "", code: StudentCode | None = None, note: str = "") -> str:
    """The graded files, each with the code graded (folded) where the report has it, else their names."""
    graded = r.get("graded_files") or {}
    shown = {c.exercise: c for c in code.exercises} if code is not None else {}
    if not graded and not shown:
        return '<p class="graded-files-none">Graded files: none.</p>'
    parts = []
    for ex in sorted(set(graded) | set(shown)):
        c = shown.get(ex)
        label = graded.get(ex) or (c.label if c else "")
        head = f"{_e(ex)}: <code>{_e(label)}</code>"
        if c is None or c.omitted:
            why = f' <span class="code-note">({_e(c.omitted)})</span>' if c is not None else ""
            parts.append(f"<li>{head}{why}</li>")
            continue
        marks = _marks(r, c)
        pre, lines = _code(anchor, c, marks)
        said = [f"{lines} line{'s' if lines != 1 else ''}"] + ([f"{len(marks)} marked"] if marks else [])
        cut = (
            f'<p class="code-note truncated">(truncated: {c.truncated} more line{"s" if c.truncated != 1 else ""} not '
            f"shown; the report shows at most {MAX_FILE_BYTES >> 10} KB of a file and {MAX_STUDENT_BYTES >> 10} KB "
            "of a student)</p>"
            if c.truncated
            else ""
        )
        parts.append(
            f'<li><details class="source" id="{anchor}-{_e(ex)}" data-exercise="{_e(ex)}"><summary>{head} '
            f'<span class="code-note">({", ".join(said)})</span></summary>{pre}{cut}</details></li>'
        )
    if code is None:
        why = note or "only their names are shown: this report was written without the graded code"
    else:
        why = code.note or "click one for the code graded; marked lines are named by a failing item or a flag"
    return f'<p>Graded files ({_e(why)}):</p><ul class="graded-files">{"".join(parts)}</ul>'


def _markers(s: str, r: dict, pairs: list[dict], anchors: dict) -> str:
    """Every marker on a student: late, similar pairs, intake flags, grader failed, numeric, private internals."""
    out = []

    def add(kind: str, text: str) -> None:
        out.append(f'<li data-marker="{_e(kind)}"><span class="flag">{_e(kind)}</span> {text}</li>')

    penalty = r.get("late_penalty") or {}
    if r.get("late") is True:
        days = penalty.get("days_late")
        late = (
            f"submitted {days} day{'s' if days != 1 else ''} after the due date "
            f"(submitted {penalty.get('submitted_at')}, due {penalty.get('due')})"
            if days
            else FLAG_MEANING["late"]
        )
        add("late", _e(late))
    if penalty:
        said = f"{_e(late_line(penalty))} Score {_num(r['score'])}/{_num(r['max_score'])} after it."
        add("late-penalty", said + (f" {_e(penalty['note'])}." if penalty.get("note") else ""))
    for p in pairs:
        other = p["b"] if p["a"] == s else p["a"]
        add("similar", f"pair with {_link(other, anchors)}, score {_e(format(p.get('score', 0), '.2f'))}")
    for f in r.get("intake_flags") or []:
        add(str(f), _e(FLAG_MEANING.get(f, "flagged at intake")))
    if r.get("grader_failed"):
        add("grader-failed", _e(FLAG_MEANING["grader-failed"]))
    flags = r.get("flags") or {}
    for kind in ("numeric-differentiation", "private-internals"):
        key = kind.replace("-", "_")
        found = flags.get(key) or []
        if found:
            lis = "".join(
                f"<li>{_e(f.get('exercise'))} line {_e(f.get('line'))}: {_e(f.get('what'))}: "
                f"<code>{_e(f.get('code'))}</code></li>"
                for f in found
                if isinstance(f, dict)
            )
            cls = "private" if kind == "private-internals" else "numeric"
            add(kind, f'{_e(FLAG_MEANING[kind])}<ul class="{cls}">{lis}</ul>')
    if not out:
        return '<p class="markers-none">No markers.</p>'
    return f'<p>Markers:</p><ul class="markers">{"".join(out)}</ul>'


def _detail(
    s: str,
    r: dict,
    anchor: str,
    pairs: list[dict] = (),
    anchors: dict | None = None,
    code: StudentCode | None = None,
    code_note: str = "",
) -> str:
    ident = r.get("identity") or {}
    who = ", ".join(f"{_e(k)}: {_e(v)}" for k, v in sorted(ident.items()))
    notes = "".join(f"<li>{_e(n)}</li>" for n in _notes(r))
    rows = "".join(
        f'<tr data-item="{_e(i["id"])}"><td>{_e(i["id"])}</td><td class="st-{_e(i["status"])}">{_e(i["status"])}</td>'
        f'<td class="num">{_num(i["score"])}/{_num(i["max_score"])}</td>'
        f'<td class="num">{_maxdiff(i.get("maxdiff"))}</td>'
        f"<td>{_shape(i.get('shape')) or 'none'}"
        + (
            f" (expected {_shape(i.get('expected_shape'))})"
            if i.get("expected_shape") is not None and i.get("shape") != i.get("expected_shape")
            else ""
        )
        + f"</td><td>{_e(', '.join(i['traps']))}</td><td>{_e(i['message'])}</td></tr>"
        for i in r["items"]
    )
    return (
        f'<section class="student" id="{anchor}" data-student="{_e(s)}"><h3>{_e(s)}: '
        f"{_num(r['score'])}/{_num(r['max_score'])}</h3>"
        + (f"<p>{who}</p>" if who else "")
        + _markers(s, r, list(pairs), anchors or {})
        + _sources(r, anchor, code, code_note)
        + (f'<p>Intake notes:</p><ul class="notes">{notes}</ul>' if notes else "")
        + "<table><tr><th>item</th><th>status</th><th>points</th><th>maxdiff</th><th>shape</th><th>traps</th>"
        f"<th>message</th></tr>{rows}</table>" + '<p><a href="#students">back to the table</a></p></section>'
    )


def html_report(
    summary: dict, students: dict | None = None, sources: dict[str, StudentCode] | None = None, code_note: str = ""
) -> str:
    """Return report.html: everything above in one self-contained page.

    sources: {student: StudentCode}, the code each was graded on (sources.graded_sources); None shows the graded
    files by name only (code_note says why, if there is more to say).
    """
    students = students or {}
    anchors = _anchors(students)
    similar = _similar_pairs(summary)
    failing = _failing(summary, students)
    item_anchors = {item: f"fail-{k}" for k, item in enumerate(summary["items"])}
    for item in failing:
        item_anchors.setdefault(item, f"fail-{len(item_anchors)}")
    s = summary["score"]
    details = "".join(
        _detail(
            st,
            students[st],
            anchors[st],
            similar.get(st, []),
            anchors,
            (sources or {}).get(st, StudentCode(note="not shown: not read again for this report"))
            if sources is not None
            else None,
            code_note,
        )
        for st in sorted(students)
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>backprop-ninja class report</title>
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<style>{STYLE}</style>
</head><body>
<h1>Class report</h1>
<p id="headline">{summary["students"]} submissions; score mean {s["mean"]}, median {s["median"]},
range {s["min"]}-{s["max"]} of {summary["max_score"]}.</p>
<nav>{NAV}</nav>
<h2 id="students">Students</h2><p>Click a column heading to sort; type to filter; click a student for every item.</p>
{_students_table(students, anchors, similar)}
<h2 id="histogram">Score histogram</h2>
{_histogram(students, summary["max_score"])}
<h2 id="items">Pass rate per item</h2>
{_pass_rates(summary, failing, item_anchors)}
{_failing_lists(summary, failing, item_anchors, anchors)}
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
