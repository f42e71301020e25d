"""The end of `grade batch` writes the same bytes by quicker means: each quick path against the plain rule it replaced.

shown() turns lone surrogates into U+FFFD; the report's code blocks split lines as _LINE does.
"""

from __future__ import annotations

import html
import random

from grader.classroom.reports.html import _LINE, _code, _e, _lines
from grader.classroom.reports.sources import Shown
from grader.submissions.intake.finding import shown


def test_shown_replaces_each_lone_surrogate_and_nothing_else():
    def plain(name: str) -> str:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in name)

    rnd = random.Random(1)
    alphabet = ["a", "é", "\u2028", "\ud800", "\udcff", "\U0001f600", "\x00", "<", "\ufffd"]
    for _ in range(3000):
        name = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(8)))
        assert shown(name) == plain(name)
    page = "<p>" + "x" * 100_000 + "\udcff</p>"
    assert shown(page) == plain(page)


def test_report_lines_are_those_of_LINE():
    def plain(text: str) -> list[str]:
        out = []
        for m in _LINE.finditer(text):
            if not m.group(0):
                break
            out.append(m.group(1))
        return out

    rnd = random.Random(2)
    for _ in range(5000):
        text = "".join(rnd.choice(["a", "\r", "\n", "\r\n", "\x0b", "\u2028", " "]) for _ in range(rnd.randrange(9)))
        assert _lines(text) == plain(text)


def test_a_code_block_escapes_and_marks_every_line_as_one_line_at_a_time_did():
    def plain(anchor: str, code: Shown, marks: dict) -> str:
        rows = []
        for k, m in enumerate(_LINE.finditer(code.text), 1):
            if not m.group(0):
                break
            where = code.line_map[k - 1] if k <= len(code.line_map) else ""
            attrs = f' data-n="{k}"' + (f' data-where="{html.escape(where)}"' if code.line_map else "")
            if k in marks:
                said = list(dict.fromkeys(marks[k]))
                why = "; ".join(said[:3]) + (f"; and {len(said) - 3} more" if len(said) > 3 else "")
                attrs = f' class="ln hl" id="{anchor}-{_e(code.exercise)}-L{k}" title="{_e(why)}"{attrs}'
            else:
                attrs = f' class="ln"{attrs}'
            rows.append(f"<span{attrs}>{_e(m.group(1))}</span>\n")
        return f'<pre class="code{" nb" if code.line_map else ""}">{"".join(rows)}</pre>'

    text = "def f(x):\r\n    return x < 1 & 'a' > \"b\"\n\n</pre><script>\rlast"
    marks = {2: ["ex1.a: failed", "ex1.b: error", "ex1.a: failed", "c", "d"], 4: ["numeric: <x>"], 99: ["gone"]}
    for line_map in ((), ("cell 1, line 1", "cell 1, line 2"), tuple(f"cell <{k}>" for k in range(9))):
        code = Shown("ex1", "ex1.py", text, line_map)
        for m in (marks, {}):
            pre, lines = _code("s3", code, m)
            assert pre == plain("s3", code, m)
            assert lines == sum(1 for x in _LINE.finditer(text) if x.group(0))
