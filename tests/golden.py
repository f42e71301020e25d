"""The golden class: what `grade batch` writes for it, as reviewable text, to hold every later run to.

The class is every tests/corpus case (each trap snippet appended to the reference), three independent correct
students, the stubs, the reference and six hostile submissions: 120 students. Their outputs are kept as plain text
under tests/golden/batch/, one file per output file with the same relative name: gradebook.csv, canvas.csv,
summary.json (without the machine's walls), manifest.json and students/*.json. report.html is not kept: it is
~0.5 MB of markup that renders the same per-student JSON (statuses, scores, traps, messages, intake notes).

The text is normalised so that it is the same on every CPU up to float32 rounding: JSON is re-dumped with sorted
keys and indent=1, CSV is re-written with "\\n" line ends, and every float, in JSON numbers and inside strings and
CSV cells, is cut to 4 significant digits (scores excepted: they are kept and compared as written).

`compare_file` then pins everything except rounding noise (see `close`, `same_text`, NOISY):
  - statuses, verdicts, traps, shapes, names, intake notes and all other non-numeric text: exactly;
  - integers (shapes, counts, line numbers, positions, CSV scores) and anything under a "score" or "max_score"
    key: exactly;
  - floats (maxdiff, 1.62e-07 inside a message): equal if |now - golden| <= 1e-6 + 1e-3 * |golden|, the float32
    noise that AVX-512, AVX2 and generic kernels (ATEN_CPU_CAPABILITY=default) leave in a maxdiff being < 1e-6;
  - an item's "exact" may differ only where it says maxdiff == 0.0 on both sides and both maxdiffs are <= 1e-6;
  - NOISY lists the few messages whose enumeration of entries comes from a threshold that borderline float32 entries
    cross or not depending on the CPU; only that enumeration is masked.

    python -m tests.golden build DIR     write the class into DIR/subs (and DIR/course.toml)
    python -m tests.golden update        build the class, run `grade batch` on it and rewrite tests/golden/batch/
                                         (review `git diff tests/golden/batch` and say why in the commit)
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests import hostile_files
from tests.independent import student_files

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GOLDEN = TESTS / "golden" / "batch"
SECRET = "golden-class-secret: every run draws the same hidden geometry"
HOSTILE = (
    "infinite_loop",
    "segfault",
    "forged_deep_nesting",
    "stash_between_exercises",
    "monkeypatch",
    "read_reference",
)
TIMEOUT = "3"  # the README's --timeout
MACHINE_FIELDS = ("sandbox",)  # summary.json's walls: what this machine allows, not what a student earned

DIGITS = 4  # significant digits a float keeps in the golden text
ABS_TOL, REL_TOL = 1e-6, 1e-3  # floats equal if |now - golden| <= ABS_TOL + REL_TOL * |golden|
EXACT_KEYS = frozenset({"score", "max_score"})  # JSON keys whose whole value is pinned exactly (summary's "score" too)
# A number standing alone (not inside ex1, dW1 or a hex digest); "38." at a sentence's end is the integer 38.
NUMBER = re.compile(r"(?<![\w.])([-+]?(?:\d+\.\d+|\d+)(?:[eE][-+]?\d+)?)(?!\w)")
_ROWS = r"in rows \d+(?:, \d+)*(?: and \d+ more)?"
_COLUMNS = r"in columns \d+(?:, \d+)*(?: and \d+ more)?"
# (student, item) -> the part of its message that enumerates what a float threshold picked out. Which borderline
# entries cross the threshold is float32 rounding, so that part differs between CPUs (each of these was seen to
# change between AVX-512, AVX2 and ATEN_CPU_CAPABILITY=default). It is masked; the rest of the message, and the
# item's status, traps and score, stay exact. A new entry needs a run that shows the CPU moving it.
NOISY = {
    # rows where dlogit_maxes (~1e-9, noise by construction) is not exactly zero: "... and 22 more" / "23 more"
    ("trap_ex1_dlogits_max_broadcast", "ex1.dlogits"): _ROWS,
    ("trap_ex1_dlogits_max_broadcast_ones", "ex1.dlogits"): _ROWS,
    # columns where leaving out eps=1e-5 crosses the tolerance: column 9 is borderline ("37/38/39 more")
    ("trap_ex4_bn_missing_eps", "ex4.dW1"): _COLUMNS,
    # training step 1's dC is borderline: "differs from autograd in dC, dW1; see the ex4.dC item" or "in dW1; ..."
    ("trap_ex4_bn_missing_eps", "ex4.training"): r"in d\w+(?:, d\w+)*; see the ex4\.d\w+ item",
}
MASK = "<CPU-dependent>"


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def _reference() -> dict[str, str]:
    return {f"ex{k}.py": (ROOT / "reference" / f"ex{k}.py").read_text() for k in range(1, 5)}


def build(root: Path) -> Path:
    """Write the golden class into root/subs and its course.toml into root; return the subs folder."""
    subs = root / "subs"
    ref = _reference()
    _write(subs / "reference", ref)
    _write(subs / "stubs", {f"ex{k}.py": (ROOT / "exercises" / f"ex{k}.py").read_text() for k in range(1, 5)})
    for k in range(3):
        _write(subs / f"independent_{k}", student_files(k))
    for case in sorted((TESTS / "corpus").glob("ex*/*.py")):
        ex = case.parent.name
        _write(subs / f"trap_{ex}_{case.stem}", {**ref, f"{ex}.py": ref[f"{ex}.py"] + "\n\n" + case.read_text()})
    for name in HOSTILE:
        text = (TESTS / "hostile" / f"{name}.py").read_text()
        files = dict(ref)
        for ex, part in hostile_files.parts(text):  # as tests/test_batch.py makes a hostile student
            files[f"{ex}.py"] += "\n\n" + part
        _write(subs / f"hostile_{name}", files)
    (root / "course.toml").write_text(f'secret = "{SECRET}"\n')
    return subs


def run(
    subs: Path, out: Path, course: Path, python: str = sys.executable, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run the real `grade batch` on the class (env: the subprocess's whole environment, None for ours)."""
    cmd = [python, "-m", "grader", "batch", str(subs), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT]
    cmd += ["--course", str(course)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


# --- the normalised text ---------------------------------------------------------------------------------------


def _round(x: float) -> float:
    return x if not math.isfinite(x) else float(f"{x:.{DIGITS}g}")


def _round_token(token: str) -> str:
    """A float written with more than DIGITS significant digits, cut to DIGITS; integers and short floats as is."""
    if not re.search(r"[.eE]", token):
        return token
    mantissa = re.split(r"[eE]", token)[0].lstrip("+-").replace(".", "").lstrip("0")
    return f"{float(token):.{DIGITS}g}" if len(mantissa) > DIGITS else token


def _round_text(text: str) -> str:
    return NUMBER.sub(lambda m: _round_token(m.group(1)), text)


def _normal(value, exact: bool = False):
    """A JSON value with its floats (and the floats inside its strings) cut to DIGITS significant digits."""
    if isinstance(value, dict):
        return {k: _normal(v, exact or k in EXACT_KEYS) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v, exact) for v in value]
    if isinstance(value, float) and not exact:
        return _round(value)
    if isinstance(value, str) and not exact:
        return _round_text(value)
    return value


def _dump_json(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _dump_csv(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _read_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def normalise(out: Path) -> dict[str, str]:
    """Return the golden text of a `grade batch` output folder, by relative path."""
    files = {}
    for name in ("gradebook.csv", "canvas.csv", "items.csv"):
        files[name] = _dump_csv([[_round_text(c) for c in row] for row in _read_csv((out / name).read_text())])
    summary = json.loads((out / "summary.json").read_text())
    for field in MACHINE_FIELDS:
        summary.pop(field, None)
    files["summary.json"] = _dump_json(_normal(summary))
    files["manifest.json"] = _dump_json(_normal(json.loads((out / "manifest.json").read_text())))
    for path in sorted((out / "students").glob("*.json")):
        files[f"students/{path.name}"] = _dump_json(_normal(json.loads(path.read_text())))
    for path in sorted((out / "feedback").glob("*.md")):  # what a student is handed back, floats cut like the rest
        text = _round_text(path.read_text())
        for (student, _), noisy in NOISY.items():  # the same CPU-dependent enumerations the JSON masks
            if student == path.stem:
                text = re.sub(noisy, MASK, text)
        files[f"feedback/{path.name}"] = text
    return files


def load(where: Path = GOLDEN) -> dict[str, str]:
    """Return the golden text by relative path."""
    return {p.relative_to(where).as_posix(): p.read_text() for p in sorted(where.rglob("*")) if p.is_file()}


def save(files: dict[str, str], where: Path = GOLDEN) -> None:
    """Make `where` hold exactly these files."""
    for path in where.rglob("*"):
        if path.is_file() and path.relative_to(where).as_posix() not in files:
            path.unlink()
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)


# --- the comparison ------------------------------------------------------------------------------------------------


def close(now: float, golden: float) -> bool:
    """Floats that differ by float32 rounding noise only."""
    if math.isnan(now) or math.isnan(golden) or math.isinf(now) or math.isinf(golden):
        return now == golden or (math.isnan(now) and math.isnan(golden))
    return abs(now - golden) <= ABS_TOL + REL_TOL * abs(golden)


def _same_number(now: str, golden: str) -> bool:
    if not re.search(r"[.eE]", now + golden):
        return int(now) == int(golden)  # integers: counts, positions, line numbers, CSV scores
    return close(float(now), float(golden))


def same_text(now: str, golden: str) -> bool:
    """Equal text, except that standalone floats in it may differ by rounding noise (see close)."""
    a, b = NUMBER.split(now), NUMBER.split(golden)  # [text, number, text, number, ..., text]
    if len(a) != len(b):
        return False
    return all(x == y if k % 2 == 0 else _same_number(x, y) for k, (x, y) in enumerate(zip(a, b, strict=True)))


def _exact_by_noise(item: dict) -> bool:
    """An item whose "exact" just says whether a maxdiff of rounding-noise size happens to be 0.0."""
    maxdiff = item.get("maxdiff")
    return isinstance(maxdiff, float) and abs(maxdiff) <= ABS_TOL and item.get("exact") is (maxdiff == 0.0)


class _Walk:
    """Compare a run's value with the golden one; `snap` is the run's value with its noise replaced by the golden's."""

    def __init__(self, name: str):
        self.name, self.problems = name, []

    def value(self, now, golden, path: str, exact: bool = False, student: str = ""):
        if isinstance(golden, dict) and isinstance(now, dict):
            if sorted(now) != sorted(golden):
                self.problems.append(f"{path}: keys {sorted(set(now) ^ set(golden))} added or gone")
                return now
            item = (student, golden.get("id")) if "id" in golden else None
            snap = {}
            for k in golden:
                where = f"{path}.{k}" if path else k
                if item in NOISY and k == "message":
                    snap[k] = self.masked(now[k], golden[k], NOISY[item], where)
                elif k == "exact" and _exact_by_noise(now) and _exact_by_noise(golden):
                    snap[k] = golden[k]  # maxdiff 0.0 against 9e-10 is noise, and so is exact true against false
                else:
                    snap[k] = self.value(now[k], golden[k], where, exact or k in EXACT_KEYS, student)
            return snap
        if isinstance(golden, list) and isinstance(now, list):
            if len(now) != len(golden):
                self.problems.append(f"{path}: {len(golden)} entries, now {len(now)}")
                return now
            pairs = enumerate(zip(now, golden, strict=True))
            return [self.value(x, y, f"{path}[{i}]", exact, student) for i, (x, y) in pairs]
        if exact or type(now) is not type(golden) or isinstance(golden, (bool, int)) or golden is None:
            same = type(now) is type(golden) and now == golden
        elif isinstance(golden, float):
            same = close(now, golden)
        elif isinstance(golden, str):
            same = same_text(now, golden)
        else:
            same = now == golden
        if not same:
            self.problems.append(f"{path}: {golden!r} -> {now!r}")
        return golden if same else now

    def masked(self, now, golden, pattern: str, path: str):
        if isinstance(now, str) and isinstance(golden, str):
            a, n = re.subn(pattern, MASK, now)
            b, m = re.subn(pattern, MASK, golden)
            if n and m and same_text(a, b):
                return golden
        self.problems.append(f"{path}: {golden!r} -> {now!r} (even with {pattern!r} masked)")
        return now


def compare_file(name: str, now: str, golden: str) -> tuple[list[str], str]:
    """Return what differs beyond rounding noise (empty if nothing) and the run's text with its noise snapped to the
    golden values, so that a diff against the golden text shows only what differs."""
    walk = _Walk(name)
    if name.endswith(".json"):
        student = name.removeprefix("students/").removesuffix(".json") if name.startswith("students/") else ""
        snapped = _dump_json(walk.value(json.loads(now), json.loads(golden), "", student=student))
    else:
        a, b = _read_csv(now), _read_csv(golden)
        rows = []
        for i in range(max(len(a), len(b))):
            x, y = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
            if x is not None and y is not None and len(x) == len(y) and all(map(same_text, x, y)):
                rows.append(y)
            else:
                walk.problems.append(f"line {i + 1}: {','.join(y or [])!r} -> {','.join(x or [])!r}")
                if x is not None:
                    rows.append(x)
        snapped = _dump_csv(rows)
    return walk.problems, snapped


def update(where: Path = GOLDEN) -> int:
    """Build the class, run `grade batch` on it and rewrite the golden text; return the number of files."""
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        root = Path(tmp)
        subs = build(root)
        proc = run(subs, root / "out", root / "course.toml")
        if proc.returncode not in (0, 1):
            sys.exit(f"grade batch exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
        files = normalise(root / "out")
    save(files, where)
    return len(files)


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"] and len(sys.argv) == 3:
        sys.stdout.write(f"{build(Path(sys.argv[2]))}\n")
    elif sys.argv[1:] == ["update"]:
        sys.stdout.write(f"wrote {update()} files to {GOLDEN.relative_to(ROOT)}/\n")
    else:
        sys.exit(__doc__)
