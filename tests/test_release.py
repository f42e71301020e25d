"""The student bundle: what it holds, that no reference solution leaks into it, and that it installs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import release

ROOT = Path(__file__).resolve().parents[1]
HAS_REFERENCE = any((ROOT / "reference").glob("*.py"))

FAKE_REFERENCE = '''"""Reference solution for a tiny exercise.

    a docstring line that is long enough to count
"""

import torch
from torch.nn import functional as F


def dfoo(logits, Yb, n):
    """Return the gradient of foo, a long docstring line."""
    # a long comment that is not a solution line
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    x = 1
    probs = logits.softmax(1)  # also in the stub
    return d / n
'''

FAKE_STUB = '''"""A tiny exercise."""

import torch


def dfoo(logits, Yb, n):
    """Return the gradient of foo."""
    probs = logits.softmax(1)  # also in the stub
    raise NotImplementedError
'''


@pytest.fixture
def fake_project(tmp_path):
    """Make a minimal project: pyproject.toml, grader/, exercises/ stubs and a reference/ solution."""
    root = tmp_path / "project"
    for rel, text in {
        "pyproject.toml": "[project]\nname = 'x'\n",
        "grader/__init__.py": "",
        "grader/__pycache__/junk.pyc": "x",
        "exercises/ex1.py": FAKE_STUB,
        "reference/ex1.py": FAKE_REFERENCE,
        "tests/test_x.py": "def test(): pass\n",
        "bench/b.py": "",
        "data/names.txt": "emma\nolivia\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_solution_lines_skip_everything_but_solutions(fake_project):
    lines = release.solution_lines(fake_project / "reference/ex1.py", fake_project / "exercises/ex1.py")
    # docstrings, imports, defs, comments, the stub's own line, 'x = 1' and 'return d / n' (9 chars) are out
    assert lines == ["d=F.softmax(logits,1)", "d[range(n),Yb]-=1"]


def test_find_leaks_catches_a_planted_line(fake_project, tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "grader").mkdir(parents=True)
    (bundle / "grader" / "ok.py").write_text(FAKE_STUB)
    (bundle / "README.md").write_text("nothing to see\n")
    assert release.find_leaks(bundle, fake_project / "reference") == []
    # re-spaced and embedded in a longer line, still caught
    (bundle / "README.md").write_text("nothing to see\n    >>> d[ range(n),Yb ]  -= 1   # hint\n")
    leaks = release.find_leaks(bundle, fake_project / "reference")
    assert len(leaks) == 1
    assert leaks[0].startswith("README.md:2: >>> d[ range(n),Yb ]  -= 1")
    (bundle / "blob.bin").write_bytes(b"\0d[range(n), Yb] -= 1")  # binary files are not scanned
    assert len(release.find_leaks(bundle, fake_project / "reference")) == 1


def test_build_release_on_a_fake_project(fake_project, tmp_path):
    out = release.build_release(tmp_path / "out" / "bundle", fake_project)
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "data",
        "exercises",
        "grader",
        "pyproject.toml",
    ]
    assert not list(out.rglob("__pycache__")) and (out / "data" / "names.txt").exists()
    assert (out / "exercises" / "ex1.py").read_text() == FAKE_STUB
    with pytest.raises(FileExistsError):
        release.build_release(out, fake_project)


def test_build_release_refuses_a_leak_and_cleans_up(fake_project, tmp_path):
    (fake_project / "grader" / "oops.py").write_text("def f(logits, Yb, n):\n    d = F.softmax(logits, 1)\n")
    out = tmp_path / "out" / "bundle"
    with pytest.raises(RuntimeError, match=r"grader/oops.py:2: d = F.softmax\(logits, 1\)"):
        release.build_release(out, fake_project)
    assert not out.exists()
    assert list((tmp_path / "out").iterdir()) == []  # no half-built bundle left behind


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """Build the real student bundle once."""
    return release.build_release(tmp_path_factory.mktemp("release") / "bundle", ROOT)


def test_real_bundle_contents(bundle):
    top = {p.name for p in bundle.iterdir()}
    assert {"README.md", "exercises", "grader", "pyproject.toml"} <= top
    assert not top & {"reference", "tests", "bench", ".git", ".ci"}
    assert sorted(p.name for p in (bundle / "exercises").glob("ex*.py")) == [f"ex{i}.py" for i in range(1, 5)]
    assert not list(bundle.rglob("__pycache__")) and not list(bundle.rglob("*.pyc"))
    readme = (bundle / "README.md").read_text()
    assert "pip install torch==2.13.0 ." in readme and "grade ex1" in readme
    for ex in ("ex1", "ex2", "ex3", "ex4"):
        assert (bundle / "exercises" / f"{ex}.py").read_bytes() == (ROOT / "exercises" / f"{ex}.py").read_bytes()


@pytest.mark.skipif(not HAS_REFERENCE, reason="reference/ is empty")
def test_real_bundle_has_no_leaks_and_a_plant_is_caught(bundle, tmp_path):
    reference = ROOT / "reference"
    assert release.find_leaks(bundle, reference) == []
    planted = tmp_path / "planted"
    shutil.copytree(bundle, planted)
    lines = {ref.name: release.solution_lines(ref, ROOT / "exercises" / ref.name) for ref in reference.glob("*.py")}
    name, keys = next((n, k) for n, k in sorted(lines.items()) if k)
    original = next(
        line.strip() for line in (reference / name).read_text().splitlines() if release._norm(line) == keys[0]
    )
    with open(planted / "exercises" / name, "a") as f:
        f.write(f"\n# spoiler\n    {original}\n")
    leaks = release.find_leaks(planted, reference)
    assert leaks and leaks[0].startswith(f"exercises/{name}:")
    assert original in leaks[0]


@pytest.mark.slow
def test_bundle_installs_and_grades(bundle, tmp_path):
    venv = tmp_path / "venv"
    # --without-pip: the system's pip and setuptools do the install (a venv's bundled setuptools may be too
    # old to build a wheel without the `wheel` package, and --no-build-isolation fetches nothing)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    work = tmp_path / "student"
    shutil.copytree(bundle, work)
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet", "."],
        cwd=work, check=True, capture_output=True, text=True,
    )  # fmt: skip
    grade = bindir / "grade"
    assert grade.exists()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(grade), "ex1", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    out = json.loads(proc.stdout)
    items = out["items"]
    assert len(items) == 26, proc.stderr
    assert all(i["status"] == "not_attempted" for i in items)
    assert out["score"] == 0
    where = subprocess.run(
        [str(bindir / "python"), "-c", "import grader; print(grader.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(venv)  # the bundle's grader, not the project's
