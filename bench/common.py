"""Shared by the benchmarks: whole-process runs, checked outputs, paired statistics and class builders."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference"
EXERCISES = ROOT / "exercises"
CORPUS = ROOT / "tests" / "corpus"
HOSTILE = ROOT / "tests" / "hostile"
PYTHON = sys.executable  # the interpreter itself, never a pyenv shim (a shim adds ~0.1 s of bash per run)
EX_FILES = ("ex1", "ex2", "ex3", "ex4")
SECRET = "bench-fixed-secret-so-every-run-draws-the-same-hidden-geometry"  # reproducible gradebooks

_CORPUS_EXPECT = re.compile(r"#\s*expect:\s*item=(\S+)\s+status=(\S+)\s+traps=(\S*)")
_HOSTILE_EXPECT = re.compile(r"#\s*expect:\s*exercise=(\S+)\s+item=(\S+)\s+status=(\S+)\s+(message|flag)=(.+)")
_SECTION = re.compile(r"^# --- (ex\d)\.py$", re.M)  # a hostile case may append to several exercise files


class CheckFailed(RuntimeError):
    """A timed run's exit status or output was not what its case expects: its time must not be reported."""


def grade_cmd() -> list[str]:
    """Return the `grade` console script next to this interpreter (what a user runs), resolved past any shim."""
    script = Path(PYTHON).parent / "grade"
    return [str(script)] if script.is_file() else [PYTHON, "-m", "grader"]


def clean_env(**extra: str) -> dict:
    """Return this environment without PYTHONPATH (so the installed grader runs), plus extra variables.

    GRADER_WARM is 0 unless extra says otherwise: every `grade` grades in its own process and starts no warm
    process (grader/cli/warm.py); bench_grade times the warm path apart, with a folder of its own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GRADER_WARM"] = "0"
    env.update(extra)
    return env


def compile_bytecode(*roots: Path) -> str:
    """Write the .pyc files of the grader under each root, as `pip install` does; return a line saying so.

    A user's installed grader has its bytecode; without it every run compiles ~50 modules first (~40 ms).
    Machines that set PYTHONDONTWRITEBYTECODE (this one does) never write it, so a timed run would not be
    what a user runs. The timed processes keep the variable; they only find the bytecode ready.
    """
    import compileall

    done = []
    for root in roots:
        for sub in ("grader", "reference", "exercises"):
            if (Path(root) / sub).is_dir():
                compileall.compile_dir(str(Path(root) / sub), quiet=1)
                done.append(str(Path(root) / sub))
    return "bytecode: compiled " + ", ".join(done) + " (as an install would; PYTHONDONTWRITEBYTECODE kept)"


# ---------------------------------------------------------------------------------------------------------------
# whole-process runs


@dataclass
class Run:
    """One finished process: wall seconds, exit status and what it printed."""

    seconds: float
    rc: int
    out: str
    err: str

    def tail(self, n: int = 1500) -> str:
        """Return the end of its output, for an error message."""
        return f"--- stdout (end)\n{self.out[-n:]}\n--- stderr (end)\n{self.err[-n:]}"


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: float = 3600) -> Run:
    """Run a command to completion and time it from spawn to reap."""
    t = time.perf_counter()
    p = subprocess.run(
        cmd, cwd=cwd or ROOT, env=env or clean_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    return Run(time.perf_counter() - t, p.returncode, p.stdout, p.stderr)


@dataclass
class Case:
    """A command to time and the check its every run must pass (check raises CheckFailed)."""

    name: str
    cmd: list[str]
    check: Callable[[Run], None]
    cwd: Path | None = None
    env: dict | None = None
    prepare: Callable[[], None] | None = None  # run before each timed run, outside the timing (clear an OUT)
    times: list = field(default_factory=list)
    runs: list = field(default_factory=list)

    def once(self) -> Run:
        """Run, check and return one run (not recorded)."""
        if self.prepare is not None:
            self.prepare()
        r = run(self.cmd, cwd=self.cwd, env=self.env)
        try:
            self.check(r)
        except CheckFailed as exc:
            raise CheckFailed(f"{self.name}: {exc}\ncommand: {' '.join(self.cmd)}\n{r.tail()}") from None
        return r


def paired(cases: list[Case], rounds: int, warmup: int = 1, seed: int = 12, keep_runs: bool = False) -> None:
    """Run every case once per round, in a shuffled order each round; record the checked times in case.times."""
    rng = random.Random(seed)
    for _ in range(warmup):  # pages the files in; checked but not recorded
        for c in cases:
            c.once()
    for _ in range(rounds):
        order = list(cases)
        rng.shuffle(order)
        for c in order:
            r = c.once()
            c.times.append(r.seconds)
            if keep_runs:
                c.runs.append(r)


def describe(xs: list[float], unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
    """Return 'median M unit (range lo-hi, n=k)' of a list of measurements."""
    xs = [x * scale for x in xs]
    med, lo, hi = statistics.median(xs), min(xs), max(xs)
    return f"median {med:.{digits}f} {unit} (range {lo:.{digits}f}-{hi:.{digits}f}, n={len(xs)})"


def ratios(num: list[float], den: list[float]) -> list[float]:
    """Return the per-round ratios of two paired series."""
    return [a / b for a, b in zip(num, den, strict=True)]


def ratio_line(label: str, num: list[float], den: list[float], target: str = "") -> str:
    """Return a printed line: the median of the paired per-round ratios, their range and the ratio of medians."""
    rs = ratios(num, den)
    med = statistics.median(num) / statistics.median(den)
    t = f"   target {target}" if target else ""
    return (
        f"{label}: {statistics.median(rs):.3f} (paired per-round ratios, range {min(rs):.3f}-{max(rs):.3f}, "
        f"n={len(rs)}; ratio of medians {med:.3f}){t}"
    )


# ---------------------------------------------------------------------------------------------------------------
# cases: what the tests pin, reused as realistic submissions


@dataclass(frozen=True)
class Trap:
    """A tests/corpus snippet: appended to the reference file of its exercise, it pins one item's verdict."""

    exercise: str
    path: Path
    item: str
    status: str
    traps: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.exercise}_{self.path.stem}"


@dataclass(frozen=True)
class Hostile:
    """A tests/hostile case: the expected verdict of one item, by status and a message or flag fragment."""

    path: Path
    exercise: str
    item: str
    status: str
    kind: str  # "message" | "flag"
    text: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def touched(self) -> set[str]:
        """Return every exercise the case appends to."""
        return {self.exercise, *_SECTION.findall(self.path.read_text())}


def traps() -> list[Trap]:
    """Return every corpus case, sorted by exercise and file name."""
    out = []
    for path in sorted(CORPUS.glob("ex*/*.py")):
        m = _CORPUS_EXPECT.match(path.read_text().splitlines()[0])
        if not m:
            raise ValueError(f"{path}: no '# expect:' line")
        item, status, ids = m.groups()
        out.append(Trap(path.parent.name, path, item, status, tuple(sorted(t for t in ids.split(",") if t))))
    return out


def hostile_cases() -> list[Hostile]:
    """Return every hostile case with its expectation."""
    out = []
    for path in sorted(HOSTILE.glob("*.py")):
        m = _HOSTILE_EXPECT.match(path.read_text().splitlines()[0])
        if not m:
            raise ValueError(f"{path}: no '# expect:' line")
        exercise, item, status, kind, text = m.groups()
        out.append(Hostile(path, exercise, item, status, kind, text.strip()))
    return out


def write_student(folder: Path, exercise: str | None = None, snippet: str = "", base: Path | dict = REFERENCE) -> Path:
    """Write a full submission (all four files of base), with a snippet appended to one or more exercise files.

    base: a folder holding ex1.py .. ex4.py, or {file name: text}.
    """
    folder.mkdir(parents=True, exist_ok=True)
    files = base if isinstance(base, dict) else {f"{ex}.py": (base / f"{ex}.py").read_text() for ex in EX_FILES}
    files = dict(files)
    if exercise:
        parts = _SECTION.split(snippet)  # [first part, 'ex2', its part, ...]
        for ex, part in [(exercise, parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]:
            files[f"{ex}.py"] = files[f"{ex}.py"] + "\n\n" + part
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


# ---------------------------------------------------------------------------------------------------------------
# a class of full submissions and what each student's JSON must say


@dataclass
class Student:
    """One student of a built class and the expectation their JSON must meet."""

    name: str
    kind: str  # "correct" | "trap" | "hostile"
    trap: Trap | None = None
    hostile: Hostile | None = None


def _independent():
    """Import tests/independent.py by path (never putting this checkout on sys.path ahead of PYTHONPATH)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_independent", ROOT / "tests" / "independent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_class(subs: Path, n: int, correct_share: float = 0.5, hostile: bool = False) -> list[Student]:
    """Write n full submissions: correct ones, then one per trap snippet in turn; plus every hostile case if asked.

    Every student has all four exercise files, written in a style of their own (tests/independent.py: different
    derivations, names and layout per student), so no two files are alike. A trap student's snippet is appended
    to their own correct files. The trap students cycle through the whole tests/corpus (all four exercises, the
    right-in-another-style `_ok` cases included), so every trap id occurs. A course.toml with a fixed secret
    beside subs makes every run draw the same hidden geometry, so runs are byte-comparable.
    """
    student_files = _independent().student_files
    if subs.exists():  # a kept class from an earlier run: start afresh, so no stale student remains
        shutil.rmtree(subs)
    subs.mkdir(parents=True)
    (subs.parent / "course.toml").write_text(f'secret = "{SECRET}"\n')
    corpus = traps()
    n_correct = round(n * correct_share)
    students = []
    for i in range(n):
        if i < n_correct:
            s = Student(f"s{i:04d}_correct", "correct")
            write_student(subs / s.name, base=student_files(i))
        else:
            t = corpus[(i - n_correct) % len(corpus)]
            s = Student(f"s{i:04d}_{t.name}", "trap", trap=t)
            write_student(subs / s.name, t.exercise, t.path.read_text(), base=student_files(i))
        students.append(s)
    if hostile:
        for k, h in enumerate(hostile_cases()):
            s = Student(f"h_{h.name}", "hostile", hostile=h)
            write_student(subs / s.name, h.exercise, h.path.read_text(), base=student_files(n + k))
            students.append(s)
    return students


def check_student(s: Student, result: dict) -> None:
    """Raise CheckFailed unless a student's JSON has the verdicts their case pins."""
    items = {i["id"]: i for i in result.get("items", [])}
    if len(items) != 36:
        raise CheckFailed(f"{s.name}: {len(items)} items in the JSON, expected 36")
    if s.kind == "correct":
        bad = [k for k, i in items.items() if i["status"] != "passed" or i["traps"]]
        if bad:
            raise CheckFailed(f"{s.name}: the reference must pass every item; not: {bad}")
        return
    if s.kind == "trap":
        t = s.trap
        got = items[t.item]
        if (got["status"], tuple(sorted(got["traps"]))) != (t.status, t.traps):
            raise CheckFailed(f"{s.name}: {t.item} is {got['status']} {got['traps']}, expected {t.status} {t.traps}")
        others = [
            k
            for k, i in items.items()
            if k != t.item and not (k.startswith("ex4.") and t.exercise == "ex4") and i["status"] != "passed"
        ]
        if others:
            raise CheckFailed(f"{s.name}: items other than {t.item} failed: {others}")
        return
    h = s.hostile
    got = items[h.item]
    if h.status != "any" and got["status"] != h.status:
        raise CheckFailed(f"{s.name}: {h.item} is {got['status']}, expected {h.status}: {got['message'][:300]}")
    if h.kind == "flag":
        if not result.get("flags", {}).get(h.text):
            raise CheckFailed(f"{s.name}: no {h.text} flag")
    elif h.text not in got["message"] and h.text not in got["traps"]:
        raise CheckFailed(f"{s.name}: {h.item}'s message lacks {h.text!r}: {got['message'][:300]}")
    others = [k for k, i in items.items() if i["exercise"] not in h.touched and i["status"] != "passed"]
    if others:
        raise CheckFailed(f"{s.name}: items of untouched exercises failed: {others}")


def check_outdir(out: Path, students: list[Student]) -> dict[str, bytes]:
    """Check every student's JSON and the gradebook of a batch run; return {file: bytes} of what it wrote."""
    files = {}
    rows = (out / "gradebook.csv").read_text().splitlines()
    if len(rows) != len(students) + 1:
        raise CheckFailed(f"gradebook.csv has {len(rows) - 1} rows for {len(students)} students")
    for s in students:
        raw = (out / "students" / f"{s.name}.json").read_bytes()
        check_student(s, json.loads(raw))
        files[f"students/{s.name}.json"] = raw
    for name in ("gradebook.csv", "summary.json"):
        files[name] = (out / name).read_bytes()
    return files
