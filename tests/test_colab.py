"""The student notebook in a fresh runtime, as in Colab: its first cell installs the bundle, then check() grades.

The runtime is a new virtual environment with nothing of this project in it: only torch (standing in for the
torch Colab has) and ipykernel, to be a Jupyter kernel. nbclient runs here and drives that kernel, whose working
folder holds nothing but bundle.zip, zipped the way docs/notebooks.md says.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from grader.ship import release
from grader.ship import student_notebook as student
from tests.conftest import ROOT

HAS_REFERENCE = any((ROOT / "reference").glob("*.py"))
KERNEL = "fresh-runtime"
ANSWER = """# Exercise 1: assign dlogprobs, dprobs, ... dC here, in backprop order
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0 / n
"""
WHERE = """import grader, torch
print("grader from", grader.__file__)
print("torch from", torch.__file__)"""


def _run(argv, **kwargs):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{argv}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _fresh_runtime(where: Path) -> tuple[Path, Path]:
    """Make a venv that sees no package of this interpreter's but torch, ipykernel and pip; return its python and
    the folder those three come from."""
    _run([sys.executable, "-m", "venv", "--without-pip", where])
    python = where / ("Scripts" if os.name == "nt" else "bin") / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    linked = where.with_name(f"{where.name}-packages")
    _link(linked, ["torch", "ipykernel", "pip"])
    Path(purelib, "_runtime_packages.pth").write_text(f"{linked}\n")
    _run([python, "-m", "ipykernel", "install", "--prefix", where, "--name", KERNEL])
    return python, linked


def _link(folder: Path, names: list[str]) -> None:
    """Link these packages of this interpreter's, and each package they require, into folder, dist-info and all.

    What `pip install torch==2.13.0 ipykernel` would unpack (~50 s of this test's time, most of it torch's copy):
    the runtime finds them installed (its .pth names the folder), and nothing else of this interpreter's. The
    folder lies outside the venv, so the runtime's pip, should it ever want another version of one, installs that
    in the venv and deletes nothing through a link (asked for mpmath 1.2.1 here: "Can't uninstall 'mpmath'. No
    files were found to uninstall", the outer 1.3.0 untouched).
    """
    folder.mkdir()
    todo, seen = list(names), set()
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        if dist.metadata["Name"].lower() in seen:
            continue
        seen.add(dist.metadata["Name"].lower())
        needs = [Requirement(r) for r in dist.requires or ()]
        todo += [r.name for r in needs if r.marker is None or r.marker.evaluate({"extra": ""})]
        tops = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")} - {"__pycache__"}
        for top in tops:
            target = Path(dist.locate_file(top))
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)


def _notebook():
    """Return the student notebook up to Ex1's check(), with one gradient answered and a cell saying where from."""
    from nbformat import v4

    nb = student.notebook()
    k = next(i for i, c in enumerate(nb.cells) if c.source == 'check("ex1")')
    nb.cells = nb.cells[: k + 1]
    for cell in nb.cells:
        if cell.source == student.EX1:
            cell.source = ANSWER
    nb.cells.append(v4.new_code_cell(WHERE))
    return nb


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not HAS_REFERENCE, reason="reference/ is empty: the bundle cannot be built")
def test_the_notebook_installs_the_bundle_and_grades_in_a_fresh_runtime(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    bundle = release.build_release(tmp_path / "release" / "bundle", ROOT)
    content = tmp_path / "content"  # Colab's /content: the notebook's folder, with bundle.zip uploaded into it
    content.mkdir()
    shutil.make_archive(str(content / "bundle"), "zip", bundle)  # cd bundle && zip -r ../bundle.zip .
    venv = tmp_path / "venv"
    assert importlib.metadata.version("torch").split("+")[0] == release.TORCH_VERSION  # the bundle's own pin
    python, linked = _fresh_runtime(venv)
    missing = subprocess.run([python, "-c", "import grader"], capture_output=True, cwd=content)
    assert missing.returncode != 0  # nothing of this project in the runtime before the first cell

    monkeypatch.setenv("JUPYTER_PATH", str(venv / "share" / "jupyter"))  # the runtime's kernel, found first
    monkeypatch.delenv("PYTHONPATH", raising=False)
    nb = _notebook()
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name=KERNEL, resources={"metadata": {"path": str(content)}}
    ).execute()
    outputs = {cell.source: cell.get("outputs", []) for cell in nb.cells if cell.cell_type == "code"}
    errors = [o for outs in outputs.values() for o in outs if o.get("output_type") == "error"]
    assert not errors, [(e["ename"], e["evalue"]) for e in errors]

    said = "".join(o.get("text", "") for o in outputs[student.INSTALL])
    assert "grader installed" in said
    where = "".join(o.get("text", "") for o in outputs[WHERE])
    assert f"grader from {venv}" in where and f"torch from {linked}" in where, where  # the bundle's; the runtime's
    tables = [o["data"]["text/html"] for o in outputs['check("ex1")'] if "text/html" in o.get("data", {})]
    assert len(tables) == 1, outputs['check("ex1")']
    assert "<code>ex1.dlogprobs</code>" in tables[0] and "<code>ex1.dC</code>" in tables[0]
    assert tables[0].count(">passed<") == 1  # dlogprobs, graded in the runtime's own sandbox


FAKE_PIP = """import json, sys, types
calls = []
sys.modules["subprocess"] = types.SimpleNamespace(run=lambda argv, check: calls.append(argv[1:]))
try:
    exec(sys.stdin.read())
except FileNotFoundError as exc:
    print("FileNotFoundError:", exc)
print(json.dumps(calls))"""


def _first_cell(folder: Path) -> tuple[str, list]:
    """Run the install cell where `grader` cannot be imported, pip replaced by a recorder; return (output, calls)."""
    python = [sys.executable, "-S", "-c", FAKE_PIP]  # -S: no site-packages, so no grader and no torch
    proc = subprocess.run(python, input=student.INSTALL, cwd=folder, capture_output=True, text=True, check=True)
    *said, calls = proc.stdout.splitlines()
    return "\n".join(said), json.loads(calls)


def test_the_install_cell_finds_the_bundle_zipped_either_way_or_says_what_to_upload(tmp_path):
    said, calls = _first_cell(tmp_path)
    assert calls == [] and f"no bundle.zip in {tmp_path}: upload it" in said
    zipped = tmp_path / "src" / "bundle"  # a zip holding the folder itself, not its contents
    zipped.mkdir(parents=True)
    (zipped / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    shutil.make_archive(str(tmp_path / "bundle"), "zip", tmp_path / "src")
    said, calls = _first_cell(tmp_path)
    assert calls == [["-m", "pip", "install", "-q", str(tmp_path / "bundle" / "bundle")]], said
    assert said.endswith("grader NOT installed")  # the recorder installed nothing


def test_the_install_cell_does_nothing_where_the_grader_is_installed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(student.INSTALL, "install cell", "exec"), {})
    assert capsys.readouterr().out == "grader installed\n" and not list(tmp_path.iterdir())
