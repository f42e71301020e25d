"""report.html in a real headless Chromium: load it, sort the table, follow a link, screenshot, read what it shows."""

from __future__ import annotations

import html
import html.parser
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from grader.classroom.batch import grade_batch
from grader.classroom.reports import write_report
from grader.classroom.reports.html import FLAG_MEANING, html_report
from grader.classroom.reports.sources import (
    CHANGED,
    MAX_FILE_BYTES,
    MAX_STUDENT_BYTES,
    OVER_STUDENT,
    Shown,
    StudentCode,
    graded_sources,
    shown,
)
from grader.grading.traps import TRAPS
from grader.sandbox import Limits
from grader.submissions.intake import discover
from grader.submissions.sources import Source
from tests.conftest import CORPUS, EXERCISES, REFERENCE, make_submission
from tests.notebooks import lecture

LIMITS = Limits(timeout=2.0, memory_mb=1024)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a small class: full marks, the dC trap, the stub, an error, private internals, an entry to skip."""
    subs = tmp_path_factory.mktemp("subs")
    make_submission(subs / "ada")
    dc = (REFERENCE / "ex1.py").read_text() + "\n\n" + (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text()
    make_submission(subs / "bob", {"ex1.py": dc})
    make_submission(subs / "cleo", base=EXERCISES)
    make_submission(subs / "dan", {"ex2.py": "def dlogits(logits, Yb, n):\n    return 1 / 0\n"})
    make_submission(subs / "=2+5")
    private = (REFERENCE / "ex2.py").read_text().replace("    d /= n", "    d /= n\n    torch._C._get_tracing_state()")
    make_submission(subs / "eve", {"ex2.py": private})
    (subs / "notes.txt").write_text("not a submission")
    out = tmp_path_factory.mktemp("out")
    summary = grade_batch(subs, out, jobs=2, limits=LIMITS, progress=False)
    return out, summary


def test_report_is_self_contained_and_escaped(graded):
    out, _ = graded
    page = (out / "report.html").read_text()
    for fetch in ("http://", "https://", "src=", "@import", "url("):
        assert fetch not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""), fetch
    assert '<td data-value="=2+5"><a' in page and "<script>alert" not in page
    summary = json.loads((out / "summary.json").read_text())
    students = {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}
    hostile = {"<script>alert(1)</script>": {**students["ada"], "submission": "<script>alert(1)</script>"}}
    assert "<script>alert(1)</script>" not in html_report(summary, hostile)


def test_detail_shows_every_marker_escaped_and_notebook_notes_once(graded):
    out, _ = graded
    summary = json.loads((out / "summary.json").read_text())
    ada = json.loads((out / "students" / "ada.json").read_text())
    evil = "<script>alert(1)</script>"
    item = {**ada["items"][0], "status": "failed", "message": evil, "shape": [2, 3], "maxdiff": 0.5}
    hostile = {
        **ada,
        "submission": evil,
        "identity": {"name": f"<img src=x onerror=alert(1)> {evil}"},
        "items": [item] + ada["items"][1:],
        "late": True,
        "grader_failed": True,
        "intake_flags": ["stub", evil],
        "graded_files": {"ex1": f"{evil}.ipynb cell 3"},
        "notes": [
            f"{evil}.ipynb: ex1: graded {evil}.ipynb cell 3 (26 of 26 gradients)",
            f"ex1: graded from the notebook {evil}.ipynb cell 3",
        ],
        "flags": {
            "numeric_differentiation": [{"exercise": "ex1", "line": 7, "what": "finite differences", "code": evil}],
            "private_internals": [{"exercise": "ex1", "line": 9, "what": "private attribute ._C", "code": evil}],
        },
    }
    sim = {**(summary.get("similarity") or {}), "pairs": [{"a": evil, "b": "ada", "score": 0.97, "functions": []}]}
    code = {evil: StudentCode((Shown("ex1", f"{evil}.ipynb cell 3", f"def f():\n    return '</pre>{evil}'\n"),))}
    page = html_report({**summary, "similarity": sim}, {evil: hostile, "ada": ada}, code)
    assert "<script>alert" not in page and "<img src=x" not in page and "</pre><script" not in page
    section = page[page.index('<section class="student" id="s0"') :]
    section = section[: section.index("</section>")]
    for marker in ("late", "similar", "stub", "grader-failed", "numeric-differentiation", "private-internals"):
        assert f'data-marker="{marker}"' in section, marker
    assert '<a href="#s1">ada</a>, score 0.97' in section  # the pair links to the other student
    assert "finite differences" in section and "private attribute ._C" in section
    assert '<details class="source" id="s0-ex1" data-exercise="ex1">' in section and "&lt;/pre&gt;" in section
    assert "<td>2&times;3" in section and ">0.5<" in section  # shape and maxdiff of the item
    assert section.count("graded from the notebook") == 0 and section.count("(26 of 26 gradients)") == 1
    # without source text in the result: the graded files by name, and the page says so
    plain = html_report(summary, {"ada": ada})
    assert "only their names are shown" in plain and '<details class="source"' not in plain
    # the student table's row carries the markers too, and every item has a list of who failed it
    row = page[page.index(f'<tr data-student="{html.escape(evil)}">') :]
    row = row[: row.index("</tr>")]
    assert all(f in row for f in ("late", "similar", "grader-failed", "numeric-differentiation"))
    assert page.count('<details id="fail-') == len(summary["items"])
    first = page[page.index('<details id="fail-0"') :]
    assert f'<li data-student="{html.escape(evil)}"><a href="#s0">' in first[: first.index("</details>")]
    assert 'id="student-search"' in page


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("Chromium and chromedriver must be installed in CI (.ci/run installs them)")
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in HEADLESS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument("--window-size=1200,900")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _column(driver, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#student-table tbody tr")
    return [r.find_elements(By.TAG_NAME, "td")[index].get_attribute("data-value") for r in rows]


def test_report_in_a_browser(graded, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    out, summary = graded
    browser.get((out / "report.html").as_uri())
    assert browser.title == "backprop-ninja class report"
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0

    # the table: one row per student, sorted by id; a click on "score" sorts ascending, a second descending
    assert _column(browser, 0) == ["=2+5", "ada", "bob", "cleo", "dan", "eve"]
    score = browser.find_element(By.XPATH, "//table[@id='student-table']//th[button='score']")
    score.find_element(By.TAG_NAME, "button").click()
    assert score.get_attribute("aria-sort") == "ascending"
    assert [float(x) for x in _column(browser, 2)] == [0, 40, 41, 42, 42, 42]
    assert _column(browser, 0)[:3] == ["cleo", "dan", "bob"]
    score.find_element(By.TAG_NAME, "button").click()
    assert [float(x) for x in _column(browser, 2)] == [42, 42, 42, 41, 40, 0]
    assert _column(browser, 0)[-1] == "cleo"

    # follow bob's link to his detail: every item, the trap, and the file that was graded
    browser.find_element(By.LINK_TEXT, "bob").click()
    anchor = browser.execute_script("return location.hash")
    section = browser.find_element(By.CSS_SELECTOR, anchor)
    assert section.get_attribute("data-student") == "bob"
    assert browser.execute_script("return arguments[0].getBoundingClientRect().top", section) < 50  # scrolled to
    text = section.text
    assert "bob: 41/42" in text and "dC-repeated-rows" in text and "ex1: ex1.py" in text
    assert len(section.find_elements(By.CSS_SELECTOR, "table tr")) == 1 + len(summary["items"])  # header + items
    # his ex1 as graded, folded until opened: the dC he wrote, each line numbered
    source = section.find_element(By.CSS_SELECTOR, "details.source[data-exercise='ex1']")
    assert source.get_attribute("open") is None and not source.find_element(By.TAG_NAME, "pre").is_displayed()
    source.find_element(By.TAG_NAME, "summary").click()
    code = source.find_element(By.TAG_NAME, "pre")
    assert code.is_displayed() and "    dC[Xb] += demb\n" in code.text and "# Looks right and never errors" in code.text
    first = code.find_element(By.CSS_SELECTOR, "span.ln")
    assert (
        browser.execute_script("return getComputedStyle(arguments[0], '::before').content", first) == '"1"'
    )  # the line number, drawn beside the code (never copied with it)

    # histogram: every student is in one bin
    counts = [int(r.get_attribute("data-count")) for r in browser.find_elements(By.CSS_SELECTOR, "rect.bin")]
    assert sum(counts) == 6
    # traps: meaning and who; flags; skipped entries; similarity
    trap_row = browser.find_element(By.ID, "trap-dC-repeated-rows")
    assert TRAPS["dC-repeated-rows"].concept[:40] in trap_row.text and "bob" in trap_row.text
    flag = browser.find_element(By.CSS_SELECTOR, "#flag-table tr[data-flag='error']")
    assert "dan" in flag.text and FLAG_MEANING["error"] in flag.text
    private = browser.find_element(By.CSS_SELECTOR, "#flag-table tr[data-flag='private-internals']")
    assert "eve" in private.text and "dan" not in private.text
    # the line eve's flag names is marked in her (folded) ex2; its link opens the code there
    eve = json.loads((out / "students" / "eve.json").read_text())
    flag = eve["flags"]["private_internals"][0]
    mark = browser.find_element(By.CSS_SELECTOR, f"section[data-student='eve'] #s5-ex2-L{flag['line']}")
    assert "hl" in mark.get_attribute("class") and "private internals" in mark.get_attribute("title")
    assert "_get_tracing_state" in mark.get_attribute("textContent") and not mark.is_displayed()
    browser.execute_script("location.hash = arguments[0]", f"#s5-ex2-L{flag['line']}")
    assert mark.is_displayed()
    assert browser.execute_script("return document.getElementById('s5-ex2').open") is True
    eve_row = browser.find_element(By.CSS_SELECTOR, "#student-table tr[data-student='eve']")
    assert "private-internals" in eve_row.text
    assert "private attribute ._C" in browser.find_element(
        By.CSS_SELECTOR, "section[data-student='eve'] ul.private"
    ).get_attribute("textContent")
    assert "notes.txt" in browser.find_element(By.ID, "skipped-table").text
    sim = browser.find_element(By.XPATH, "//h2[@id='similarity']/following-sibling::p[1]").text
    assert f"{summary['similarity']['compared_pairs']} pairs compared" in sim

    # an item of the pass rates leads to who failed it, and each of them to their detail
    item = "ex1.dC"  # bob's dC-repeated-rows
    assert browser.execute_script("return document.getElementById('fail-0').open") is False
    browser.find_element(By.CSS_SELECTOR, f"svg a.item-link[data-item='{item}']").click()
    anchor = browser.execute_script("return location.hash")
    failed = browser.find_element(By.CSS_SELECTOR, anchor)
    assert failed.get_attribute("data-item") == item and failed.get_attribute("open") is not None
    who = [li.get_attribute("data-student") for li in failed.find_elements(By.CSS_SELECTOR, "li")]
    assert "bob" in who and "ada" not in who
    failed.find_element(By.LINK_TEXT, "bob").click()
    section = browser.find_element(By.CSS_SELECTOR, browser.execute_script("return location.hash"))
    assert section.get_attribute("data-student") == "bob"
    assert browser.execute_script("return arguments[0].getBoundingClientRect().top", section) < 50
    assert section.find_element(By.CSS_SELECTOR, f"tr[data-item='{item}'] td.st-failed").text == "failed"

    # the search box filters the table by any text of a row
    browser.execute_script("location.hash = '#students'")
    box = browser.find_element(By.ID, "student-search")

    def shown() -> list[str]:
        rows = browser.find_elements(By.CSS_SELECTOR, "#student-table tbody tr")
        return sorted(r.get_attribute("data-student") for r in rows if r.is_displayed())

    box.send_keys("bo")
    assert shown() == ["bob"]
    assert browser.find_element(By.ID, "search-count").text == "1 of 6 students match"
    box.clear()
    box.send_keys("PRIVATE-int")  # a flag, case-insensitive
    assert shown() == ["eve"]
    box.clear()
    box.send_keys("=2+")
    assert shown() == ["=2+5"]
    box.send_keys("nobody")
    assert shown() == []
    box.send_keys(Keys.BACKSPACE * len("=2+nobody"))
    assert shown() == ["=2+5", "ada", "bob", "cleo", "dan", "eve"]

    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 1000 and height >= 600
    assert len(png) > 20_000  # a rendered page, not a blank one


# ----------------------------------------------------------------------------------------------------------
# the code each student was graded on, in their detail

HOSTILE = "# </script><script>alert(1)</script> </details></li></ul> <!-- </pre>\n"


@pytest.fixture(scope="module")
def coded(tmp_path_factory):
    """Grade a class whose code tries to break out of the report, a notebook, and an error naming its line."""
    subs = tmp_path_factory.mktemp("coded")
    make_submission(subs / "hal", {"ex2.py": HOSTILE + (REFERENCE / "ex2.py").read_text() + HOSTILE})
    (subs / "nora").mkdir()
    lecture.write(subs / "nora" / "notebook.ipynb", lecture.lecture_cells())
    make_submission(subs / "dan", {"ex2.py": "def dlogits(logits, Yb, n):\n    return 1 / 0\n"}, base=None)
    out = tmp_path_factory.mktemp("coded-out")
    grade_batch(subs, out, jobs=2, limits=LIMITS, progress=False)
    return subs, out


def _section(page: str, student: str) -> str:
    start = page.index(f'<section class="student" id="s{sorted(["dan", "hal", "nora"]).index(student)}"')
    return page[start : page.index("</section>", start)]


class _Tags(html.parser.HTMLParser):
    """Count the tags a page opens and closes, and collect the text of every <pre>."""

    def __init__(self):
        super().__init__()
        self.opened: dict[str, int] = {}
        self.closed: dict[str, int] = {}
        self.pre: list[str] = []
        self._in_pre = 0

    def handle_starttag(self, tag, attrs):
        self.opened[tag] = self.opened.get(tag, 0) + 1
        if tag == "pre":
            self._in_pre += 1
            self.pre.append("")

    def handle_endtag(self, tag):
        self.closed[tag] = self.closed.get(tag, 0) + 1
        if tag == "pre":
            self._in_pre -= 1

    def handle_data(self, data):
        if self._in_pre:
            self.pre[-1] += data


def test_graded_code_is_shown_escaped_and_cannot_break_out(coded):
    page = (coded[1] / "report.html").read_text()
    assert page.count("<script>") == 1 and "alert(1)</script>" not in page and "<!-- </pre>" not in page
    tags = _Tags()
    tags.feed(page)
    for tag in ("details", "pre", "section", "li", "ul", "script"):  # what the code says closes nothing
        assert tags.opened.get(tag) == tags.closed.get(tag), tag
    assert tags.opened["script"] == 1
    hal = _section(page, "hal")
    code = next(t for t in tags.pre if HOSTILE.strip() in t and "def dlogits" in t)
    assert code == HOSTILE + (REFERENCE / "ex2.py").read_text() + HOSTILE  # every character, as graded
    assert '<details class="source" id="s1-ex2" data-exercise="ex2">' in hal
    assert "<summary>ex2: <code>ex2.py</code>" in hal
    ex2 = hal[hal.index('<details class="source" id="s1-ex2"') :]
    ex2 = ex2[: ex2.index("</pre>")]
    lines = len((HOSTILE + (REFERENCE / "ex2.py").read_text() + HOSTILE).splitlines())
    assert [int(n) for n in re.findall(r'data-n="(\d+)"', ex2)] == list(range(1, lines + 1))  # every line, once
    # dan's error names its line: that line is marked, with the item that failed
    dan = _section(page, "dan")
    assert '<span class="ln hl" id="s0-ex2-L2" title="ex2.dlogits: error" data-n="2">    return 1 / 0</span>' in dan


def test_a_notebooks_code_is_the_code_the_grader_extracted_labelled_by_cells(coded):
    subs, out = coded
    page = (out / "report.html").read_text()
    nora = json.loads((out / "students" / "nora.json").read_text())
    label = nora["graded_files"]["ex1"]
    assert label.startswith("notebook.ipynb cell")
    section = _section(page, "nora")
    assert f"<summary>ex1: <code>{html.escape(label)}</code>" in section
    assert '<pre class="code nb">' in section and 'data-where="cell ' in section
    from grader.submissions.intake import read_entry

    (entry,) = [e for e in discover(subs)[0] if e.student == "nora"]
    converted = read_entry(entry).sources["ex1"].text
    tags = _Tags()
    tags.feed(section)
    assert converted in tags.pre  # the converted code, not the notebook's JSON


def test_the_code_stays_out_of_the_students_json_and_every_lms_output(coded):
    _, out = coded
    for path in out.rglob("*"):
        if path.is_file() and path.name != "report.html":
            assert "alert(1)" not in path.read_text(errors="replace"), path
    hal = json.loads((out / "students" / "hal.json").read_text())
    assert "sources" not in hal and "def dlogits" not in json.dumps(hal)


def test_code_is_bounded_per_file_and_per_student():
    line = "x = 1  # " + "y" * 90 + "\n"  # 100 bytes
    big = Source("ex1", "ex1.py", line * 2000, "ex1.py")  # 200 KB
    small = Source("ex2", "ex2.py", line * 10, "ex2.py")
    out = shown({"ex1": big, "ex2": small, "ex3": big, "ex4": big, "ex5": big, "ex6": big})
    assert [c.exercise for c in out] == ["ex1", "ex2", "ex3", "ex4", "ex5", "ex6"]
    ex1, ex2, *_, ex5, ex6 = out
    assert len(ex1.text.encode()) <= MAX_FILE_BYTES and ex1.text.endswith("\n")  # cut at a line's end
    assert ex1.truncated == 2000 - ex1.text.count("\n") > 0
    assert ex2.text == small.text and ex2.truncated == 0
    total = sum(len(c.text.encode()) for c in out)
    assert total <= MAX_STUDENT_BYTES and 0 < ex5.truncated and ex6.omitted == OVER_STUDENT and not ex6.text
    page = html_report(
        {"students": 0, "max_score": 0, "score": {k: 0 for k in ("mean", "median", "min", "max")}, "items": {},
         "traps": {}, "trap_students": {}},
        {"ada": {"score": 0, "max_score": 0, "items": [], "graded_files": {"ex1": "ex1.py", "ex6": "ex6.py"}}},
        {"ada": StudentCode(out)},
    )  # fmt: skip
    assert f"(truncated: {ex1.truncated} more lines not shown" in page and html.escape(OVER_STUDENT) in page


def test_code_whose_files_changed_after_grading_is_not_shown(tmp_path):
    make_submission(tmp_path / "subs" / "ada", {"ex2.py": "def dlogits(logits, Yb, n):\n    return 0\n"}, base=None)
    (entry,), _ = discover(tmp_path / "subs")
    before = entry.digest("opts")
    code = graded_sources([entry], {"ada": before}, "opts")["ada"]
    assert code.note == "" and "return 0" in code.exercises[0].text
    (tmp_path / "subs" / "ada" / "ex2.py").write_text("def dlogits(logits, Yb, n):\n    return 1\n")
    changed = graded_sources([entry], {"ada": before}, "opts")["ada"]
    assert changed.note == CHANGED and not changed.exercises


def test_the_report_is_written_without_code_when_reading_it_fails(graded, tmp_path):
    out, _ = graded
    summary = json.loads((out / "summary.json").read_text())
    ada = json.loads((out / "students" / "ada.json").read_text())

    def broken():
        raise MemoryError("a student's files exhausted the helper")

    write_report(tmp_path / "report.html", summary, {"ada": ada}, broken)
    page = (tmp_path / "report.html").read_text()
    assert "The graded code could not be read again: a helper process failed" in page
    assert '<details class="source"' not in page and "ex1: <code>ex1.py</code>" in page


def test_feedback_is_written_while_a_child_writes_the_report_and_a_failure_there_stops_the_child(graded, tmp_path):
    """write_outputs writes the feedback files while the report's child reads the code and writes report.html; if
    that work fails (a full disk, a Ctrl-C), the child is stopped, not left to write the page later, and an earlier
    run's page is not left beside this run's gradebook."""
    import time

    out, _ = graded
    summary = json.loads((out / "summary.json").read_text())
    ada = json.loads((out / "students" / "ada.json").read_text())
    seen = []

    def meanwhile():
        seen.append(_children())  # the report's child exists while this runs
        raise OSError("No space left on device")

    def slow():
        time.sleep(5)
        return {}

    before = set(_children())  # a browser of another test's, say
    (tmp_path / "report.html").write_text("an earlier run's report")  # --out reused
    with pytest.raises(OSError, match="No space left"):
        write_report(tmp_path / "report.html", summary, {"ada": ada}, slow, meanwhile=meanwhile)
    writer = set(seen[0]) - before
    assert writer, "the report was not being written in a child while the feedback was"
    assert not writer & set(_children()), "the report's child outlived the failure"
    time.sleep(0.2)
    assert not (tmp_path / "report.html").exists()


def _children() -> list[int]:
    """Return the pids of this process's live children."""
    pid = os.getpid()
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_graded_code_in_a_browser(coded, browser):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    browser.get((coded[1] / "report.html").as_uri())
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 - nothing a student wrote ran
    browser.find_element(By.LINK_TEXT, "nora").click()
    section = browser.find_element(By.CSS_SELECTOR, browser.execute_script("return location.hash"))
    assert section.get_attribute("data-student") == "nora"
    source = section.find_element(By.CSS_SELECTOR, "details.source[data-exercise='ex1']")
    assert not source.find_element(By.TAG_NAME, "pre").is_displayed()  # folded
    source.find_element(By.TAG_NAME, "summary").click()
    code = source.find_element(By.TAG_NAME, "pre")
    assert code.is_displayed() and "def dlogprobs(" in code.text
    lines = code.find_elements(By.CSS_SELECTOR, "span.ln")
    gutters = [browser.execute_script("return getComputedStyle(arguments[0], '::before').content", s) for s in lines]
    assert any(g.startswith('"cell ') for g in gutters)  # each line beside the cell it came from

    hal = browser.find_element(By.CSS_SELECTOR, "section[data-student='hal'] details.source[data-exercise='ex2']")
    hal.find_element(By.TAG_NAME, "summary").click()
    text = hal.find_element(By.TAG_NAME, "pre").text
    assert "# </script><script>alert(1)</script> </details></li></ul> <!-- </pre>" in text
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 1
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018
