"""The student bundle: what it holds, that no reference solution leaks into it, and that it installs."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader.ship import release
from grader.spec import policy
from tests.conftest import REFERENCE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HAS_REFERENCE = any((ROOT / "reference").glob("*.py"))
HAS_GIT = shutil.which("git") is not None

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
    """Return the gradient of foo.

    probs = logits.softmax(1)  # also in the stub
    """
    raise NotImplementedError
'''


def _git(root: Path, *args: str) -> str:
    """Run git in a throwaway repository of the test's own."""
    ident = ["-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *ident, "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def fake_project(tmp_path):
    """Make a minimal project: pyproject.toml, grader/ (with a subpackage), four stubs and a reference."""
    root = tmp_path / "project"
    files = {
        "pyproject.toml": "[project]\nname = 'x'\n",
        "grader/__init__.py": "",
        "grader/intake/__init__.py": '"""A subpackage that must ship."""\n',
        "grader/__pycache__/junk.pyc": "x",
        "reference/ex1.py": FAKE_REFERENCE,
        "tests/test_x.py": "def test(): pass\n",
        "bench/b.py": "",
        "data/names.txt": "emma\nolivia\n",
    }
    files.update({f"exercises/ex{k}.py": FAKE_STUB for k in range(1, 5)})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def git_project(fake_project):
    """The fake project as a git checkout whose HEAD holds the stubs."""
    if not HAS_GIT:
        pytest.skip("git is not installed")
    _git(fake_project, "init", "-q")
    _git(fake_project, "add", ".")
    _git(fake_project, "commit", "-q", "-m", "stubs")
    return fake_project


def test_solution_lines_skip_everything_but_solutions(fake_project):
    lines = release.solution_lines(fake_project / "reference/ex1.py", fake_project / "exercises/ex1.py")
    # docstrings, imports, defs, comments, the stub's own line, 'x = 1' and 'return d / n' (9 chars) are out
    assert lines == ["d=F.softmax(logits,1)", "d[range(n),Yb]-=1"]


def test_find_leaks_catches_a_planted_line(fake_project, tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "grader").mkdir(parents=True)
    (bundle / "exercises").mkdir()
    (bundle / "exercises" / "ex1.py").write_text(FAKE_STUB)
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


def test_the_leak_scan_does_not_trust_a_filled_in_working_copy(fake_project, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(fake_project / "exercises", bundle / "exercises")
    (bundle / "exercises" / "ex1.py").write_text(FAKE_REFERENCE)  # "stubs" that are really the solution
    # compared with the project's committed-looking stubs, every solution line is a leak
    leaks = release.find_leaks(bundle, fake_project / "reference", stubs_dir=fake_project / "exercises")
    assert [leak.split(":")[0] for leak in leaks] == ["exercises/ex1.py", "exercises/ex1.py"]


def test_build_release_on_a_fake_project(fake_project, tmp_path):
    out = release.build_release(tmp_path / "out" / "bundle", fake_project)
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "backprop_ninja.ipynb",
        "course.toml",
        "data",
        "exercises",
        "grader",
        "pyproject.toml",
    ]
    assert not list(out.rglob("__pycache__")) and (out / "data" / "names.txt").exists()
    assert (out / "exercises" / "ex1.py").read_text() == FAKE_STUB
    assert (out / "grader" / "intake" / "__init__.py").exists()  # whole subpackages, not a file list
    assert policy.load(out / "course.toml") == policy.Policy(source=str(out / "course.toml"))
    with pytest.raises(FileExistsError):
        release.build_release(out, fake_project)


def test_build_release_takes_the_committed_stubs(git_project, tmp_path):
    (git_project / "exercises" / "ex1.py").write_text(FAKE_REFERENCE)  # an instructor's filled-in working copy
    out = release.build_release(tmp_path / "bundle", git_project)
    assert (out / "exercises" / "ex1.py").read_text() == FAKE_STUB
    assert release.committed_stubs(git_project)[1] == "git HEAD"


def test_build_release_refuses_a_committed_solution(git_project, tmp_path):
    (git_project / "exercises" / "ex3.py").write_text(FAKE_STUB.replace("raise NotImplementedError", "return 0"))
    _git(git_project, "commit", "-q", "-am", "oops")
    with pytest.raises(RuntimeError, match=r"git HEAD: ex3.py is not a stub: dfoo \(line 6\)"):
        release.build_release(tmp_path / "bundle", git_project)
    assert not (tmp_path / "bundle").exists()


def test_build_release_outside_git_vets_the_packaged_stubs(fake_project, tmp_path):
    (fake_project / "exercises" / "ex2.py").write_text(FAKE_REFERENCE)
    with pytest.raises(RuntimeError, match=r"exercises: ex2.py is not a stub: dfoo"):
        release.build_release(tmp_path / "bundle", fake_project)
    (fake_project / "exercises" / "ex2.py").unlink()
    with pytest.raises(FileNotFoundError, match="ex2.py is missing"):
        release.build_release(tmp_path / "bundle", fake_project)


def test_check_stub_accepts_only_raising_bodies():
    release.check_stub("ok.py", b'def f(x):\n    """Doc."""\n    raise NotImplementedError("write me")\n', "here")
    for body in ("pass", "return x", "raise ValueError", "x = 1\n    raise NotImplementedError"):
        with pytest.raises(RuntimeError, match="is not a stub: f"):
            release.check_stub("bad.py", f"def f(x):\n    {body}\n".encode(), "here")
    with pytest.raises(RuntimeError, match=r"is not a stub: module-level code \(line 2\)"):
        release.check_stub("bad.py", b"import torch\nd = torch.zeros(3)\n", "here")
    with pytest.raises(RuntimeError, match="not a valid stub file"):
        release.check_stub("bad.py", b"def f(:\n", "here")


def test_build_release_needs_the_reference(fake_project, tmp_path):
    shutil.rmtree(fake_project / "reference")
    with pytest.raises(RuntimeError, match="reference has no solutions"):
        release.build_release(tmp_path / "bundle", fake_project)


def test_build_release_refuses_a_leak_and_cleans_up(fake_project, tmp_path):
    (fake_project / "grader" / "oops.py").write_text("def f(logits, Yb, n):\n    d = F.softmax(logits, 1)\n")
    out = tmp_path / "out" / "bundle"
    with pytest.raises(RuntimeError, match=r"grader/oops.py:2: d = F.softmax\(logits, 1\)"):
        release.build_release(out, fake_project)
    assert not out.exists()
    assert list((tmp_path / "out").iterdir()) == []  # no half-built bundle left behind


def test_build_release_refuses_instructor_folders_anywhere(fake_project, tmp_path):
    (fake_project / "grader" / "tests").mkdir()
    (fake_project / "grader" / "tests" / "t.py").write_text("")
    with pytest.raises(RuntimeError, match="instructor-only folders ended up in the bundle: grader/tests"):
        release.build_release(tmp_path / "bundle", fake_project)


def test_build_release_carries_the_policy_but_never_the_secret(fake_project, tmp_path):
    secret = "correct horse battery staple"
    course = policy.Policy(points={"ex2.dlogits": 5}, level="hint", secret=secret)
    out = release.build_release(tmp_path / "bundle", fake_project, policy=course)
    shipped = policy.load(out / "course.toml")
    assert (shipped.points, shipped.level, shipped.secret) == ({"ex2.dlogits": 5}, "hint", None)
    assert not [p for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    # a secret that is somehow in a shipped file stops the build
    (fake_project / "grader" / "config.py").write_text(f"SECRET = {secret!r}\n")
    with pytest.raises(RuntimeError, match=r"the course secret would ship in the bundle, in grader/config.py"):
        release.build_release(tmp_path / "bundle2", fake_project, policy=course)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """Build the real student bundle once, with a course policy that has a secret."""
    course = policy.Policy(points={"ex2.dlogits": 5}, secret="the real bundle's course secret")
    return release.build_release(tmp_path_factory.mktemp("release") / "bundle", ROOT, policy=course)


def _committed(name: str) -> bytes:
    """Return a stub as the real project committed it (the working copy outside a git checkout)."""
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"HEAD:./exercises/{name}"], capture_output=True)
    return shown.stdout if HAS_GIT and shown.returncode == 0 else (ROOT / "exercises" / name).read_bytes()


def test_real_bundle_contents(bundle):
    top = {p.name for p in bundle.iterdir()}
    assert {"README.md", "exercises", "grader", "pyproject.toml", "course.toml"} <= top
    assert not top & {"reference", "tests", "bench", ".git", ".ci"}
    assert sorted(p.name for p in (bundle / "exercises").glob("ex*.py")) == [f"ex{i}.py" for i in range(1, 5)]
    assert not list(bundle.rglob("__pycache__")) and not list(bundle.rglob("*.pyc"))
    assert {p.name for p in (ROOT / "grader").iterdir() if (p / "__init__.py").exists()} <= {
        p.name for p in (bundle / "grader").iterdir()
    }
    for ex in ("ex1", "ex2", "ex3", "ex4"):
        assert (bundle / "exercises" / f"{ex}.py").read_bytes() == _committed(f"{ex}.py")
    shipped = policy.load(bundle / "course.toml")
    assert shipped.points == {"ex2.dlogits": 5} and shipped.secret is None
    assert not [p for p in bundle.rglob("*") if p.is_file() and b"the real bundle's course secret" in p.read_bytes()]


def test_real_bundle_readme_documents_what_the_bundle_accepts(bundle):
    readme = (bundle / "README.md").read_text()
    assert f'pip install torch=={release.TORCH_VERSION} numpy ".[plot]"' in readme
    assert "grade ex1 --only dcounts" in readme and "grade ex1 dcounts" not in readme
    from grader.sandbox.child import ALLOWED_IMPORTS, STAND_INS
    from grader.show.table import _LABEL

    assert all(f"`{name}`" in readme for name in ALLOWED_IMPORTS if name != "__future__")  # what the sandbox allows
    assert all(f"`{m}.{n}`" in readme for m, names in STAND_INS.items() for n in names)  # and what sys, types offer
    assert f"reported as `{_LABEL['not_attempted']}`" in readme  # the word the table uses
    from click.testing import CliRunner

    from grader.cli.main import main

    for line in _readme_commands(readme):
        argv = shlex.split(line)
        if argv[0] != "grade":
            assert (bundle / argv[1]).is_file(), line
            continue
        sub = argv[1:2] if len(argv) > 1 and not argv[1].startswith("-") else []
        help_text = CliRunner().invoke(main, [*sub, "--help"]).output
        for option in (a for a in argv[2:] if a.startswith("--")):
            assert option in help_text, f"{line}: {option} is not an option of grade {' '.join(sub)}"


def _readme_commands(readme: str) -> list[str]:
    """Return the shell commands of the README's code blocks that run the grader (comments removed)."""
    blocks = re.findall(r"```\n(.*?)```", readme, re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(("grade ", "python data/"))]


@pytest.mark.skipif(not HAS_REFERENCE, reason="reference/ is empty")
def test_real_bundle_has_no_leaks_and_a_plant_is_caught(bundle, tmp_path):
    reference = ROOT / "reference"
    assert release.find_leaks(bundle, reference) == []
    planted = tmp_path / "planted"
    shutil.copytree(bundle, planted)
    lines = {ref.name: release.solution_lines(ref, bundle / "exercises" / ref.name) for ref in reference.glob("*.py")}
    name, keys = next((n, k) for n, k in sorted(lines.items()) if k)
    original = next(
        line.strip() for line in (reference / name).read_text().splitlines() if release._norm(line) == keys[0]
    )
    with open(planted / "exercises" / name, "a") as f:
        f.write(f"\n# spoiler\n    {original}\n")
    leaks = release.find_leaks(planted, reference, stubs_dir=bundle / "exercises")
    assert leaks and leaks[0].startswith(f"exercises/{name}:")
    assert original in leaks[0]


def _venv(tmp_path: Path) -> Path:
    """Make a venv that sees this interpreter's installed packages, and return its bin folder.

    `--system-site-packages` is not enough when the tests run inside a venv: a venv made from a venv's python
    is based on the base interpreter, whose site-packages lacks torch and names. So the new venv gets a .pth
    file that lists this interpreter's site directories (not its .pth files: the project's editable install
    must not shadow the bundle's grader).
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    purelib = subprocess.run(
        [str(bindir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    site_dirs = [p for p in sys.path if p and (p in here or Path(p).name in ("site-packages", "dist-packages"))]
    Path(purelib, "_outer_site.pth").write_text("\n".join(dict.fromkeys(site_dirs)) + "\n")
    return bindir


def _student_work(bundle: Path, tmp_path: Path) -> Path:
    """Copy the bundle and fill in some of its exercises: a failing ex1 item, ex2, ex4 and a folder elsewhere."""
    work = tmp_path / "student"
    shutil.copytree(bundle, work)
    for name in ("ex2.py", "ex4.py"):
        shutil.copy(REFERENCE / name, work / "exercises" / name)
    tanh = "\n\ndef dhpreact(hpreact, dh):\n    return (1 - hpreact**2) * dh\n"
    (work / "exercises" / "ex1.py").write_text((REFERENCE / "ex1.py").read_text() + tanh)
    shutil.copytree(REFERENCE, work / "path" / "to" / "folder")
    return work


@pytest.mark.slow
@pytest.mark.skipif(not HAS_REFERENCE, reason="reference/ is empty")
def test_bundle_installs_and_its_readme_commands_work(bundle, tmp_path):
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("the plot extra is not installed: pip install -e '.[test,plot]'")
    bindir = _venv(tmp_path)
    work = _student_work(bundle, tmp_path)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "--no-deps", *isolation, "--quiet", "."],
        cwd=work, check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert (bindir / "grade").exists()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    subpackages = sorted(f"grader.{p.parent.name}" for p in (work / "grader").glob("*/__init__.py"))
    imports = "; ".join(f"import {m}" for m in ["grader", *subpackages])
    where = subprocess.run(
        [str(bindir / "python"), "-c", f"{imports}; print(grader.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(bindir.parent)  # the bundle's grader, not the project's
    shipped = subprocess.run(
        [str(bindir / "python"), "-c", "from grader.grading import texts; print(*sorted(texts.FOLDER.glob('*.toml')))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert [Path(p).name for p in shipped.stdout.split()] == ["diagnose.toml"]  # installed, the levels above left out
    (tmp_path / "full.toml").write_text('level = "full"\n')  # a course.toml that would allow every level
    proc = subprocess.run(
        ["grade", "ex1", "--only", "dhpreact", "--level", "full", "--course", str(tmp_path / "full.toml")],
        cwd=work, env=env, capture_output=True, text=True,
    )  # fmt: skip
    # the student's tanh slip: the bundle has no text above diagnose, so it says the diagnose one
    said = " ".join(proc.stdout.split())
    assert "Your tanh derivative is written with tanh's input hpreact" in said and "1 - h**2" not in said, proc.stderr

    proc = subprocess.run(["grade", "ex3", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    out = json.loads(proc.stdout)
    assert [(i["id"], i["status"]) for i in out["items"]] == [("ex3.dhprebn", "not_attempted")], proc.stderr
    proc = subprocess.run(["grade", "ex2", "--json"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(proc.stdout)["max_score"] == 5, proc.stderr  # the bundle's course.toml is read

    readme = (work / "README.md").read_text()
    for line in _readme_commands(readme):
        argv = shlex.split(line)
        if argv[0] == "python":
            argv[0] = str(bindir / "python")
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode in (0, 1), f"{line}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, f"{line}\n{proc.stderr}"
    for png in ("diff.png", "dlogits.png", "loss.png"):
        assert (work / png).stat().st_size > 1000, png


FORMULAS = ("(1 - h**2) * dh", "(bnvar + 1e-5)**-1.5", "dout @ B.T", "logits.max(1).indices")
TEXTS = ROOT / "grader" / release.TEXTS_FOLDER  # the project's trap texts, one file per level


def _level_texts(folder: Path) -> dict[str, set[str]]:
    """Return every text of each level file in a folder (a level whose file is absent: none)."""
    from grader.grading import texts

    catalogue = texts.Catalogue(folder)
    return {level: {catalogue.text(key, level) for key in catalogue.keys(level)} for level in policy.LEVELS}


def _strings(value) -> list[str]:
    """Return every string in a parsed TOML value."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _shipped_text(root: Path) -> str:
    """Return the text of every file below root, and every TOML file's strings as parsed (its lines wrap them)."""
    parts = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        parts.append(path.read_bytes().decode("utf-8", errors="replace"))
        if path.suffix == ".toml":
            parts += _strings(tomllib.loads(parts[-1]))
    return "\n".join(parts)


def _capped_package(tmp_path: Path, level: str) -> Path:
    """Copy the project's trap texts into a package folder, then leave out the levels above a course's level."""
    package = tmp_path / "grader"
    shutil.copytree(TEXTS, package / release.TEXTS_FOLDER, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    release.leave_out_texts(package, level)
    return package


def test_a_diagnose_course_ships_no_message_above_diagnose(tmp_path, monkeypatch):
    from grader.grading import texts, traps

    every = "\n".join(set().union(*_level_texts(TEXTS).values()))
    assert all(f in every for f in FORMULAS)  # what hint and full levels say in the project
    package = _capped_package(tmp_path, "diagnose")
    assert sorted(p.name for p in (package / release.TEXTS_FOLDER).iterdir()) == ["diagnose.toml"]
    assert not [f for f in FORMULAS if f in _shipped_text(package)]
    monkeypatch.setattr(texts, "TEXTS", texts.Catalogue(package / release.TEXTS_FOLDER))
    assert all(t.diagnose and t.concept for t in traps.TRAPS.values())
    assert all(t.hint == t.diagnose and t.explain == "" for t in traps.TRAPS.values())


@pytest.mark.parametrize("level", policy.LEVELS)
def test_a_level_left_out_says_the_level_below(tmp_path, monkeypatch, level):
    """A level whose file a bundle leaves out says, text by text, what the course's level says; explain is empty."""
    from grader.grading import texts, traps

    whole = texts.Catalogue(TEXTS)
    capped = texts.Catalogue(_capped_package(tmp_path, level) / release.TEXTS_FOLDER)
    top = policy.LEVELS.index(level)
    keys = set().union(*(whole.keys(lv) for lv in policy.LEVELS))
    for lv in policy.LEVELS:
        said = policy.LEVELS[min(policy.LEVELS.index(lv), top)]
        assert {k: capped.text(k, lv) for k in keys} == {k: whole.text(k, said) for k in keys}, (level, lv)
    shown = {}
    for catalogue in (whole, capped):  # and so does every trap's message, rendered
        monkeypatch.setattr(texts, "TEXTS", catalogue)
        detail = texts.detail("shape-mismatch", "keepdim-missing", d=0)  # a detail that says more at hint
        fill = {t.id: dict.fromkeys(re.findall(r"{(\w+)}", t.diagnose + t.hint), detail) for t in traps.TRAPS.values()}
        shown[catalogue] = {
            (t.id, lv): t.render(lv, **fill[t.id]) for t in traps.TRAPS.values() for lv in policy.LEVELS
        }
    for (trap_id, lv), message in shown[capped].items():
        assert message == shown[whole][trap_id, policy.LEVELS[min(policy.LEVELS.index(lv), top)]], (trap_id, lv)
    assert (capped.text("tanh-preact.explain", "full") == "") is (level != "full")


def test_the_real_bundle_of_a_diagnose_course_holds_no_formula(bundle):
    assert sorted(p.name for p in (bundle / "grader" / release.TEXTS_FOLDER).glob("*.toml")) == ["diagnose.toml"]
    assert not [f for f in FORMULAS if f in _shipped_text(bundle)]


def test_a_full_level_bundle_ships_every_level_and_no_solution_line(tmp_path):
    """At full level the explanations ship too; none of them may quote a line of the reference solutions."""
    out = release.build_release(tmp_path / "bundle", ROOT, policy=policy.Policy(level="full"))
    shipped = {p.name for p in (out / "grader" / release.TEXTS_FOLDER).glob("*.toml")}
    assert shipped == {"diagnose.toml", "hint.toml", "full.toml"}
    assert release.find_leaks(out, REFERENCE) == []


@pytest.mark.parametrize("level", ["diagnose", "hint"])
def test_a_bundle_holds_no_text_above_its_courses_level_in_code_or_comments(tmp_path, level):
    """Every text above the level, and (below hint) the formulas comments and docstrings spell out, are gone."""
    by_level = _level_texts(TEXTS)
    kept = policy.LEVELS[: policy.LEVELS.index(level) + 1]
    allowed = set().union(*(by_level[lv] for lv in kept))
    above = set().union(*(by_level[lv] for lv in policy.LEVELS if lv not in kept))
    above = {x for x in above - allowed if len(x) > 40}
    formulas = {"1 - h**2", "`dhpreact = 1 - h**2` without `* dh`"} if level == "diagnose" else set()
    project = "\n".join(p.read_text() for p in (ROOT / "grader").rglob("*.py"))
    assert above and all(f in project for f in formulas)  # in a Variant's docstring and a recogniser's
    out = release.build_release(tmp_path / "bundle", ROOT, policy=policy.Policy(level=level))
    assert sorted(p.name for p in (out / "grader" / release.TEXTS_FOLDER).glob("*.toml")) == [
        f"{lv}.toml" for lv in sorted(kept)
    ]
    shipped = _shipped_text(out)
    assert not [t[:60] for t in above | formulas if t in shipped], f"text above {level} ships"
    helped = subprocess.run([sys.executable, "-m", "grader", "--help"], cwd=out, capture_output=True, text=True)
    assert helped.returncode == 0 and "Student commands" in helped.stdout  # it still runs, its --help intact
