"""Build the student bundle (stubs and grader, never the reference solutions) and scan it for leaks."""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from pathlib import Path

from grader.spec.policy import LEVELS
from grader.spec.stubs import STUB_FILES, check_stub, committed_stubs, is_stub_body  # noqa: F401 (re-exported)

MIN_LEAK_CHARS = 10  # a solution line shorter than this (whitespace removed) is too generic to count
FORBIDDEN = ("reference", "tests", "bench")  # top-level folders that must never reach students
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".git"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}
_MAX_SCAN_BYTES = 8 << 20

TORCH_VERSION = "2.13.0"  # the torch the project is tested with; the bundle and setup.sh pin it


def student_readme() -> str:
    """Return the bundle's README, with the torch version and the modules the sandbox lets a submission import."""
    from grader.sandbox.child import ALLOWED_IMPORTS, STAND_INS

    modules = [f"`{name}`" for name in ALLOWED_IMPORTS if name != "__future__"]
    modules += [f"`{m}` (only {', '.join(f'`{m}.{n}`' for n in sorted(names))})" for m, names in STAND_INS.items()]
    imports = ", ".join(modules)
    return STUDENT_README.replace("{torch}", TORCH_VERSION).replace("{imports}", imports)


STUDENT_README = """\
# Becoming a backprop ninja: the exercises and their grader

You will backpropagate through a two-layer MLP with BatchNorm (the makemore model of Karpathy's
"Building makemore Part 4: Becoming a Backprop Ninja") by hand, without `loss.backward()`.
The grader runs your functions on a fixed, seeded batch and compares what they return with
what PyTorch's autograd computes for the same model.

## What to do

Edit the four files in `exercises/`. Each function's docstring shows the forward step it undoes and
the shape it must return; the module docstring at the top of each file explains the rules. Do not
rename the files or the functions. The grader passes arguments BY PARAMETER NAME, so the names of
your parameters decide what you receive (any forward tensor, any parameter, `Xb`, `Yb`, `n`, and in
exercise 1 the true gradient `d<var>` of any variable that comes earlier in backprop order).

| file | what you write |
| --- | --- |
| `exercises/ex1.py` | the gradient of every intermediate variable, one atomic step at a time (26 items) |
| `exercises/ex2.py` | the gradient of the cross-entropy loss with respect to the logits, in one go |
| `exercises/ex3.py` | the BatchNorm backward pass, in one go |
| `exercises/ex4.py` | the whole backward pass, used to train the network for a few steps |

A function that still raises `NotImplementedError` is reported as `todo` (`not_attempted` in `--json`),
not as an error.

Prefer the lecture's notebook layout? Open `backprop_ninja.ipynb` (in Jupyter after the install below, or
in Colab: upload it and `bundle.zip`, this folder zipped from inside it, then run its first cell, which
installs the grader), fill in the empty cell of each exercise, and run the `check()` cell after it: it grades
the cells you have run, in the same sandbox, and shows the table inline. You can also grade the saved
notebook from a terminal with `grade all --submission backprop_ninja.ipynb`.

Your code may import only these modules: {imports}. It must not use autograd (`.backward()`,
`torch.autograd.grad`, ...): autograd is what you are checked against.

## Install

You need Python 3.10 or newer. From this folder (a virtual environment is a good idea):

```
python -m venv .venv && source .venv/bin/activate     # Windows: .venv\\Scripts\\activate
pip install torch=={torch} numpy ".[plot]"
```

The `plot` extra (matplotlib) is only needed for `--plot` and `--curve`; without it, `pip install torch=={torch}
numpy .` is enough.

## Grade your work

Run these from this folder; each grades the files in `exercises/`:

```
grade ex1                      # one exercise
grade ex1 --only dcounts       # one function of it (repeat --only for more)
grade ex1 --only dC --hints    # ... and explain each trap at length
grade all                      # all four
grade all --submission path/to/folder   # grade ex1.py..ex4.py kept elsewhere
grade ex1 --json               # machine-readable output
grade ex1 --plot diff.png      # a heat map of where each failing gradient differs
grade ex2 --plot dlogits.png   # the lecture's picture of dlogits
grade ex4 --full --steps 2000 --curve loss.png   # train the network with your backward alone
python data/make_fixture.py    # print the fixed batch every grade is measured on
```

`grade --help` and `grade ex1 --help` list every option. `grade ex4 --full` without `--steps` runs the
lecture's 200,000 steps, which takes a while. It trains on the census names of the `names` package unless
`--data names.txt` gives the lecture's file, and says which: a right backward reaches about train 1.69 / val
2.00 on the census names, and the lecture's train 2.07 / val 2.11 on its names.txt.

## Reading the table

There is one row per graded gradient, named like `ex1.dC` (exercise 1, the gradient of `C`).

- **status**: `passed`, `failed`, `error` (your code raised an exception; the message shows your line),
  `timeout` (it ran too long) or `todo` (still the stub).
- **exact**: your tensor equals autograd's bit for bit.
- **approx**: it is within `torch.allclose`'s default tolerance of autograd's. An item passes when
  its shape is exactly right and it is approximately equal; bitwise equality is not required.
- **maxdiff**: the largest absolute difference from autograd's gradient.
- **shape**: what you returned, next to the expected shape; a gradient must have exactly the shape of
  the variable it belongs to (no silent broadcasting).
- **traps**: classic backprop mistakes the grader recognised in your numbers (for example forgetting
  that a variable used twice receives the sum of both gradients).

Each passed item earns its points; the total is shown at the bottom. The grader also runs your
code on a second model with other sizes, so hard-coded `32`, `64` or `27` will be caught: take
sizes from `n` and from the shapes of the tensors you are given. Here that second model is drawn
afresh every time you run `grade`; the one your course grades with is drawn from a secret and is
not in this folder.

## Course policy

`course.toml` in this folder is your course's grading policy: the points of each item and how much
the grader's messages say (`level`). `grade` reads it from here (or from beside the folder given to
`--submission`); `--course PATH` reads another one.
"""


def _norm(text: str) -> str:
    """Remove all whitespace so that re-indented or re-spaced copies still match."""
    return "".join(text.split())


def _docstring_lines(source: str) -> set[int]:
    """Return the 1-based line numbers covered by docstrings (module, class and function) in source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                first = body[0]
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _is_boilerplate(stripped: str) -> bool:
    """Return whether a stripped line is blank, a comment, an import or a def line."""
    return (
        not stripped
        or stripped.startswith("#")
        or stripped.startswith(("import ", "from "))
        or stripped.startswith(("def ", "async def "))
    )


def solution_lines(reference_file: Path, stub_file: Path | None) -> list[str]:
    """Return the normalised solution lines of one reference file (those its stub does not contain)."""
    source = reference_file.read_text(encoding="utf-8", errors="replace")
    docstrings = _docstring_lines(source)
    stub = []
    if stub_file is not None and stub_file.is_file():
        stub = [_norm(line) for line in stub_file.read_text(encoding="utf-8", errors="replace").splitlines()]
    found: list[str] = []
    for lineno, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if lineno in docstrings or _is_boilerplate(stripped) or stripped.startswith(('"""', "'''")):
            continue
        key = _norm(stripped)
        if len(key) < MIN_LEAK_CHARS or any(key in s for s in stub) or key in found:
            continue
        found.append(key)
    return found


def _text_lines(path: Path) -> list[str] | None:
    """Return a file's lines if it is a text file of sane size, else None."""
    try:
        if path.stat().st_size > _MAX_SCAN_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return data.decode("latin-1").splitlines()


def _walk_files(root: Path):
    """Yield every file below root, skipping caches."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def find_leaks(bundle: Path, reference_dir: Path, stubs_dir: Path | None = None) -> list[str]:
    """Return "path:line: text" for every bundle line that contains a reference solution line.

    A solution line is a stripped line of a reference .py file that is not blank, a comment, a docstring, an
    import or a def line, is at least MIN_LEAK_CHARS long without whitespace, and is not already in the stub
    of the same name in stubs_dir (default: the bundle's own exercises/, the stubs that ship on purpose).
    Matching ignores whitespace.
    """
    bundle, reference_dir = Path(bundle), Path(reference_dir)
    stubs = Path(stubs_dir) if stubs_dir is not None else bundle / "exercises"
    candidates: dict[str, str] = {}  # normalised line -> "reference/ex1.py:12"
    for ref in sorted(reference_dir.rglob("*.py")):
        if "__pycache__" in ref.parts:
            continue
        rel = ref.relative_to(reference_dir)
        source_lines = ref.read_text(encoding="utf-8", errors="replace").splitlines()
        for key in solution_lines(ref, stubs / rel):
            lineno = next((i for i, s in enumerate(source_lines, 1) if _norm(s) == key), 0)
            candidates.setdefault(key, f"{reference_dir.name}/{rel.as_posix()}:{lineno}")
    if not candidates:
        return []
    leaks = []
    for path in _walk_files(bundle):
        lines = _text_lines(path)
        if lines is None:
            continue
        rel = path.relative_to(bundle).as_posix()
        for lineno, line in enumerate(lines, 1):
            key = _norm(line)
            if len(key) < MIN_LEAK_CHARS:
                continue
            hit = next((origin for cand, origin in candidates.items() if cand in key), None)
            if hit is not None:
                leaks.append(f"{rel}:{lineno}: {line.strip()}  [solution line {hit}]")
    return leaks


def _ignore(_dir: str, names: list[str]) -> list[str]:
    """Tell copytree to skip caches and bytecode."""
    skip = [n for n in names if n in _SKIP_DIRS or n.endswith(".egg-info")]
    return skip + [n for n in names if Path(n).suffix in _SKIP_SUFFIXES]


TEXTS_FOLDER = Path("grading", "texts")  # in grader/: the trap texts, one data file per message level


def leave_out_texts(package: Path, level: str) -> list[str]:
    """Remove from a bundled grader the trap texts above the course's level: their level files; return their names.

    A course at diagnose (or hint) level ships a grader that cannot say more, whatever --level or course.toml a
    student then passes: the texts are not in the bundle at all, and where a level's file is missing the grader
    says the level below's text (grading/texts/__init__.py).
    """
    from grader.grading.texts import level_file

    removed = []
    for above in LEVELS[LEVELS.index(level) + 1 :]:
        path = level_file(package / TEXTS_FOLDER, above)
        if path.exists():
            path.unlink()
            removed.append(path.name)
    return removed


class _NoDocstrings(ast.NodeTransformer):
    """Drop every docstring (a module's, a class's, a function's): they explain the grader, formulas included."""

    def _strip(self, node):
        self.generic_visit(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


def strip_explanations(package: Path) -> None:
    """Rewrite a bundled grader without comments or docstrings (the CLI's, which are its --help, stay).

    Comments and docstrings explain how the grader recognises each bug, sometimes with the formula it expects
    (`1 - h**2`): a course below full level ships code that runs the same and says none of it.
    """
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if "cli" not in path.relative_to(package).parts:
            tree = _NoDocstrings().visit(tree)
        path.write_text(ast.unparse(ast.fix_missing_locations(tree)) + "\n", encoding="utf-8")


def build_release(outdir: Path, project_root: Path, policy=None) -> Path:
    """Build the student bundle in outdir (committed stubs, grader/, pyproject.toml, README, data/, course.toml).

    policy: the course policy to ship; its secret never does (Policy.public()). Raises FileNotFoundError for a
    missing piece, RuntimeError for a stub that is not one, a missing reference/ or a solution line that leaks.
    """
    from grader.spec.policy import FILENAME, Policy

    outdir, project_root = Path(outdir), Path(project_root)
    for needed in ("pyproject.toml", "grader", "exercises"):
        if not (project_root / needed).exists():
            raise FileNotFoundError(f"{project_root / needed} is missing: not the grader project")
    reference = project_root / "reference"
    if not any(reference.glob("*.py")):
        raise RuntimeError(f"{reference} has no solutions: the bundle cannot be checked for leaks without them")
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise FileExistsError(f"{outdir} already exists and is not empty; remove it or choose another folder")
    stubs, origin = committed_stubs(project_root)
    for name, source in stubs.items():
        check_stub(name, source, origin)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}-", dir=outdir.parent))
    staging.chmod(0o755)
    try:
        (staging / "exercises").mkdir()
        for name, source in stubs.items():
            (staging / "exercises" / name).write_bytes(source)
        shutil.copytree(project_root / "grader", staging / "grader", ignore=_ignore)  # every subpackage
        level = (policy or Policy()).level
        leave_out_texts(staging / "grader", level)  # no trap text above the course's level ...
        if level != "full":  # ... nor the formulas that comments and docstrings spell out
            strip_explanations(staging / "grader")
        shutil.copy2(project_root / "pyproject.toml", staging / "pyproject.toml")
        (staging / "README.md").write_text(student_readme(), encoding="utf-8")
        from grader.ship.student_notebook import write_student_notebook

        write_student_notebook(staging)  # backprop_ninja.ipynb: the lecture's layout, a check() after each exercise
        (staging / FILENAME).write_text((policy or Policy()).public().to_toml(), encoding="utf-8")
        if (project_root / "data").is_dir():
            shutil.copytree(project_root / "data", staging / "data", ignore=_ignore)
        present = [str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_dir() and p.name in FORBIDDEN]
        if present:
            raise RuntimeError(f"instructor-only folders ended up in the bundle: {', '.join(sorted(present))}")
        if policy is not None and policy.secret is not None:
            hits = [
                str(p.relative_to(staging)) for p in _walk_files(staging) if policy.secret.encode() in p.read_bytes()
            ]
            if hits:
                raise RuntimeError(f"the course secret would ship in the bundle, in {', '.join(hits)}")
        leaks = find_leaks(staging, reference)
        if leaks:
            shown = "\n  ".join(leaks[:20]) + ("\n  ..." if len(leaks) > 20 else "")
            raise RuntimeError(f"{len(leaks)} solution line(s) would leak into the bundle:\n  {shown}")
        if outdir.exists():
            outdir.rmdir()
        staging.rename(outdir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return outdir
