"""`grade batch --resume` after an interrupted run: the finished students are kept, the rest graded, and the outputs
are byte-identical to a run that was never interrupted."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CORPUS, REFERENCE, make_submission

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="grade batch needs Linux")
ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = ("gradebook.csv", "canvas.csv", "items.csv", "summary.json", "manifest.json", "report.html")


def _class(root: Path) -> Path:
    subs = root / "subs"
    (subs / "course.toml").parent.mkdir(parents=True)
    (subs / "course.toml").write_text('secret = "an interrupted run and a clean one draw alike"\n')
    for k in range(6):
        make_submission(subs / f"student{k}", base=REFERENCE)
    trap = (REFERENCE / "ex1.py").read_text() + "\n\n" + (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text()
    make_submission(subs / "student6", {"ex1.py": trap}, base=REFERENCE)
    return subs


def _batch(subs: Path, out: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grader", "batch", str(subs), "--out", str(out), "--jobs", "1", "--timeout", "3"]
    return subprocess.Popen([*cmd, "--no-similarity", *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _files(out: Path) -> dict[str, bytes]:
    found = {name: (out / name).read_bytes() for name in OUTPUTS}
    found.update({f"students/{p.name}": p.read_bytes() for p in sorted((out / "students").glob("*.json"))})
    found.update({f"feedback/{p.name}": p.read_bytes() for p in sorted((out / "feedback").glob("*.md"))})
    return found


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    subs = _class(tmp_path)
    clean = _batch(subs, tmp_path / "clean")
    clean.communicate(timeout=300)
    assert clean.returncode in (0, 1)

    part = tmp_path / "part"
    run = _batch(subs, part)
    journal, deadline = part / ".graded", time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)  # Ctrl-C, part-way through the class
    run.communicate(timeout=120)
    assert run.returncode != 0 and not (part / "summary.json").exists(), "the run was not interrupted"
    done = [line for line in journal.read_text().splitlines() if line.strip()]
    assert 2 <= len(done) < 7
    kept = {p.name: p.stat().st_mtime_ns for p in (part / "students").glob("*.json")}

    resumed = _batch(subs, part, "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode in (0, 1), err.decode()
    assert f"/{7 - len(kept)}" in err.decode() or len(kept) == 7, err.decode()  # only the rest was graded
    for name, mtime in kept.items():  # the finished students' files were not written again
        assert (part / "students" / name).stat().st_mtime_ns == mtime, name
    assert _files(part) == _files(tmp_path / "clean")
    assert not journal.exists()
