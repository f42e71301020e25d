"""Grade a folder of submissions in parallel: gradebook, per-student JSON, class statistics and a report."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import multiprocessing
import shutil
import statistics
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from grader import catalogue, report
from grader.sandbox import Limits

MAX_ZIP_BYTES = 8 << 20  # uncompressed exercise files taken from one zip
GRADEBOOK_COLUMNS = ("student", "score", "max_score", *catalogue.EXERCISES)
MANIFEST = "manifest.json"
FORMAT_VERSION = 1  # bump to invalidate --resume after a grading change


@dataclass(frozen=True)
class Entry:
    """One student's submission: a folder or a .zip, named by its student id."""

    student: str
    path: Path

    def digest(self, options: str) -> str:
        """Return a hash of the exercise files and grading options, for --resume."""
        h = hashlib.sha256(f"{FORMAT_VERSION}|{options}".encode())
        if self.path.is_file():
            h.update(self.path.read_bytes())
        else:
            for f in sorted(self.path.rglob("ex*.py")):
                h.update(str(f.relative_to(self.path)).encode())
                h.update(f.read_bytes())
        return h.hexdigest()


def discover(submissions: Path) -> list[Entry]:
    """List the submissions: every sub-folder and every .zip, sorted by student id."""
    entries = []
    for p in sorted(submissions.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir():
            entries.append(Entry(p.name, p))
        elif p.suffix == ".zip":
            entries.append(Entry(p.stem, p))
    return entries


def _exercise_files(root: Path) -> dict[str, Path]:
    """Find ex1.py .. ex4.py anywhere below root, preferring the shallowest copy."""
    found: dict[str, Path] = {}
    for f in sorted(root.rglob("ex*.py"), key=lambda f: (len(f.parts), str(f))):
        if f.stem in catalogue.EXERCISES and f.stem not in found and f.is_file() and not f.is_symlink():
            found[f.stem] = f
    return found


def unpack(entry: Entry, into: Path) -> Path:
    """Lay the entry's exercise files flat in a fresh folder; zips are read without trusting their paths."""
    into.mkdir(parents=True, exist_ok=True)
    if entry.path.is_dir():
        for ex, f in _exercise_files(entry.path).items():
            shutil.copyfile(f, into / f"{ex}.py")
        return into
    with zipfile.ZipFile(entry.path) as zf:
        members = sorted(
            (
                m
                for m in zf.infolist()
                if not m.is_dir() and Path(m.filename).name in {f"{e}.py" for e in catalogue.EXERCISES}
            ),
            key=lambda m: (m.filename.count("/"), m.filename),
        )
        taken, total = set(), 0
        for m in members:
            name = Path(m.filename).name
            if name in taken:
                continue
            total += m.file_size
            if total > MAX_ZIP_BYTES:
                break
            (into / name).write_bytes(zf.read(m)[:MAX_ZIP_BYTES])
            taken.add(name)
    return into


def _grade_one(args) -> tuple[str, dict]:
    entry, limits, data = args
    from grader.runner import grade

    with tempfile.TemporaryDirectory(prefix="grader-sub-") as tmp:
        try:
            folder = unpack(entry, Path(tmp))
        except (zipfile.BadZipFile, OSError) as exc:
            folder = Path(tmp) / "empty"
            folder.mkdir()
            result = grade(folder, data=data, limits=limits, name=entry.student)
            for item in result.items:
                item.status, item.message = "error", f"The submission could not be opened: {exc}"
            return entry.student, result.to_dict()
        return entry.student, grade(folder, data=data, limits=limits, name=entry.student).to_dict()


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def grade_batch(
    submissions: Path,
    out: Path,
    *,
    jobs: int = 2,
    limits: Limits | None = None,
    resume: bool = False,
    data: str | None = None,
    progress: bool = True,
) -> dict:
    """Grade every submission in a folder into OUT and return the class summary."""
    limits = limits or Limits()
    entries = discover(submissions)
    (out / "students").mkdir(parents=True, exist_ok=True)
    options = f"{limits.timeout}|{limits.memory_mb}|{data}"
    manifest_path = out / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if resume and manifest_path.exists() else {}
    digests = {e.student: e.digest(options) for e in entries}
    todo = [
        e
        for e in entries
        if not (
            resume
            and manifest.get(e.student) == digests[e.student]
            and (out / "students" / f"{e.student}.json").exists()
        )
    ]
    torch.set_num_threads(1)  # GNU OpenMP does not survive fork; the tensors here are tiny anyway
    for call in catalogue.select(catalogue.EXERCISES):  # warm the parent once; workers inherit it
        for g in catalogue.geometries(call):
            catalogue.build_fixture(call, g, data)
    bar = report.Progress(len(todo), "grading") if progress else None
    work = [(e, limits, data) for e in todo]
    if jobs <= 1 or len(work) <= 1:
        results = map(_grade_one, work)
        pool = None
    else:
        pool = multiprocessing.get_context("fork").Pool(jobs)
        results = pool.imap_unordered(_grade_one, work)
    try:
        for student, result in results:
            _write_json(out / "students" / f"{student}.json", result)
            manifest[student] = digests[student]
            if bar:
                bar.advance(student)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
        if bar:
            bar.close()
    manifest = {k: manifest[k] for k in sorted(manifest) if k in digests}
    _write_json(manifest_path, manifest)
    students = {e.student: json.loads((out / "students" / f"{e.student}.json").read_text()) for e in entries}
    (out / "gradebook.csv").write_text(gradebook(students))
    summary = summarize(students)
    _write_json(out / "summary.json", summary)
    (out / "report.html").write_text(html_report(summary))
    return summary


def gradebook(students: dict[str, dict]) -> str:
    """Return the gradebook CSV: one row per student, a column per exercise."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(GRADEBOOK_COLUMNS)
    for student in sorted(students):
        r = students[student]
        per_ex = {ex: 0.0 for ex in catalogue.EXERCISES}
        for item in r["items"]:
            per_ex[item["exercise"]] += item["score"]
        writer.writerow([student, _num(r["score"]), _num(r["max_score"]), *(_num(per_ex[e]) for e in per_ex)])
    return buf.getvalue()


def _num(x: float) -> str:
    return f"{x:g}"


def summarize(students: dict[str, dict]) -> dict:
    """Count, per item, students by status; per trap, students who hit it; list who errored or timed out."""
    items: dict[str, dict[str, int]] = {i.id: {} for i in catalogue.items()}
    trap_students: dict[str, set] = {}
    errored, timed_out = set(), set()
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
    n = len(students)
    return {
        "students": n,
        "max_score": students[next(iter(students))]["max_score"] if students else 0,
        "score": {
            "mean": round(statistics.fmean(scores), 4) if scores else None,
            "median": statistics.median(scores) if scores else None,
            "min": min(scores) if scores else None,
            "max": max(scores) if scores else None,
        },
        "items": {
            k: {s: v.get(s, 0) for s in ("passed", "failed", "error", "timeout", "not_attempted")}
            for k, v in items.items()
        },
        "traps": {t: len(s) for t, s in sorted(trap_students.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        "trap_students": {t: sorted(s) for t, s in sorted(trap_students.items())},
        "errored": sorted(errored),
        "timed_out": sorted(timed_out),
    }


def html_report(summary: dict) -> str:
    """Return a self-contained HTML page: per-item pass rates as bars and the most common traps."""
    n = max(summary["students"], 1)
    colours = {
        "passed": "#2e7d32",
        "failed": "#c62828",
        "error": "#6a1b9a",
        "timeout": "#ef6c00",
        "not_attempted": "#bdbdbd",
    }
    rows, bar_w, row_h = [], 420, 18
    for k, (item, counts) in enumerate(summary["items"].items()):
        y, x = k * row_h, 0.0
        rows.append(f'<text x="0" y="{y + 13}" font-size="12">{html.escape(item)}</text>')
        for status, colour in colours.items():
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
    legend = " ".join(f'<span style="color:{c}">&#9632; {s.replace("_", " ")}</span>' for s, c in colours.items())
    traps = (
        "".join(
            f"<tr><td><code>{html.escape(t)}</code></td><td>{c}</td><td>{100 * c / n:.0f}%</td></tr>"
            for t, c in summary["traps"].items()
        )
        or '<tr><td colspan="3">no traps hit</td></tr>'
    )
    flagged = ", ".join(html.escape(s) for s in sorted(set(summary["errored"]) | set(summary["timed_out"])))
    s = summary["score"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>backprop-ninja class report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:760px}} td,th{{padding:2px 10px;text-align:left}}</style>
</head><body>
<h1>Class report</h1>
<p>{summary["students"]} submissions; score mean {s["mean"]}, median {s["median"]}, range {s["min"]}-{s["max"]}
of {summary["max_score"]}.</p>
<h2>Pass rate per item</h2><p>{legend}</p>
<svg xmlns="http://www.w3.org/2000/svg" width="660" height="{height}">{"".join(rows)}</svg>
<h2>Most common traps</h2>
<table><tr><th>trap</th><th>students</th><th>share</th></tr>{traps}</table>
<h2>Errored or timed out</h2><p>{flagged or "none"}</p>
</body></html>
"""
