"""The golden class: what `grade batch` wrote for it before the speed work, to hold every later run to.

The class is every tests/corpus case (each trap snippet appended to the reference), three independent correct
students, the stubs, the reference and six hostile submissions: 107 students whose gradebook rows, canvas rows,
summary, manifest and per-student JSON must stay byte-identical. The outputs are kept in batch.tar.xz.

    python -m tests.golden build DIR            write the class into DIR/subs (and DIR/course.toml)
    python -m tests.golden pack OUT ARCHIVE     store a run's outputs (OUT of `grade batch`) as the golden
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.independent import student_files

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
ARCHIVE = TESTS / "golden" / "batch.tar.xz"
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
_SECTION = re.compile(r"^# --- (ex\d)\.py$", re.M)  # as tests/test_batch.py reads a hostile case


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
        parts = _SECTION.split(text)  # [first part, 'ex1', its part, ...]: the first goes to the expected exercise
        for ex, part in [(_expected_exercise(text), parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]:
            files[f"{ex}.py"] += "\n\n" + part
        _write(subs / f"hostile_{name}", files)
    (root / "course.toml").write_text(f'secret = "{SECRET}"\n')
    return subs


def _expected_exercise(text: str) -> str:
    first = text.splitlines()[0]
    return first.split("exercise=")[1].split()[0]


def run(subs: Path, out: Path, course: Path, python: str = sys.executable, env: dict | None = None) -> int:
    """Run the real `grade batch` on the class; return its exit status."""
    cmd = [python, "-m", "grader", "batch", str(subs), "--out", str(out), "--jobs", "2", "--timeout", TIMEOUT]
    cmd += ["--course", str(course)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False).returncode


def collect(out: Path) -> dict[str, bytes]:
    """Return the outputs that must not change, by relative path (summary.json without the machine's walls)."""
    files = {}
    for name in ("gradebook.csv", "canvas.csv", "manifest.json"):
        files[name] = (out / name).read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    for field in MACHINE_FIELDS:
        summary.pop(field, None)
    files["summary.json"] = (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode()
    for path in sorted((out / "students").glob("*.json")):
        files[f"students/{path.name}"] = path.read_bytes()
    return files


def pack(files: dict[str, bytes], archive: Path) -> None:
    """Store outputs in a reproducible tar.xz (sorted, no times or owners)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:xz") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            tar.addfile(info, io.BytesIO(files[name]))


def unpack(archive: Path = ARCHIVE) -> dict[str, bytes]:
    """Return the golden outputs by relative path."""
    with tarfile.open(archive, "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        sys.stdout.write(f"{build(Path(sys.argv[2]))}\n")
    elif sys.argv[1:2] == ["pack"]:
        pack(collect(Path(sys.argv[2])), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
