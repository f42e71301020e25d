"""The package's layout: one idea per folder, layers that import one way, a sandbox that knows nothing of grading."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parents[1] / "grader"
# top to bottom: a folder may import its own modules and any folder below it, never one above
LAYERS = ("cli", "ship", "classroom", "training", "show", "grading", "submissions", "spec", "truth", "sandbox")
ENTRY_POINTS = {"__init__", "__main__", "gradescope"}  # grader/*.py: thin entries, above every layer


def imports_of(path: Path) -> set[str]:
    """Return every grader module a file imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "grader":
                found.update(f"grader.{a.name}" for a in node.names)
            elif node.module.startswith("grader."):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("grader."))
    return {name for name in found if _exists(name)}


def _exists(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (GRADER / rel).with_suffix(".py").is_file() or (GRADER / rel / "__init__.py").is_file()


def layer_of(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def module_name(path: Path) -> str:
    rel = path.relative_to(GRADER.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def upward_arrows() -> list[tuple[str, str]]:
    arrows = []
    for path in sorted(GRADER.rglob("*.py")):
        source = layer_of(module_name(path))
        if source is None:
            continue
        for target in sorted(imports_of(path)):
            dest = layer_of(target)
            if dest is not None and LAYERS.index(dest) < LAYERS.index(source):
                arrows.append((module_name(path), target))
    return arrows


def test_every_module_lives_in_a_layer_folder():
    loose = [p.stem for p in GRADER.glob("*.py") if p.stem not in ENTRY_POINTS]
    assert loose == [], f"modules outside the layer folders: {loose}"
    folders = sorted(p.name for p in GRADER.iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(LAYERS)


def test_layers_import_downward_only():
    assert upward_arrows() == []


def test_the_sandbox_imports_nothing_outside_itself():
    outside = [
        (module_name(p), t)
        for p in sorted((GRADER / "sandbox").rglob("*.py"))
        for t in sorted(imports_of(p))
        if layer_of(t) != "sandbox"
    ]
    assert outside == []


def test_no_circle_of_top_level_imports():
    graph: dict[str, set[str]] = {}
    for path in sorted(GRADER.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
        names = set()
        for node in top.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grader"):
                base = node.module if node.module != "grader" else ""
                names.update(
                    f"{base}.{a.name}" if base and _exists(f"{base}.{a.name}") else base or f"grader.{a.name}"
                    for a in node.names
                )
        graph[module_name(path)] = {n for n in names if n and _exists(n) and n != module_name(path)}
    seen, stack, circles = set(), [], []

    def visit(node):
        if node in stack:
            circles.append(stack[stack.index(node) :] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if not nxt.startswith(node + "."):  # a package importing its own submodules is no circle
                visit(nxt)
        stack.pop()

    for node in sorted(graph):
        visit(node)
    assert circles == []


def test_the_laptop_sandbox_starts_before_torch_is_imported():
    """grade exN starts the spawn-backend sandbox first thing, so that it imports torch while the grader does: the
    path there (grader.cli, grader.sandbox.prespawn) must import no torch, or the two imports run one after the other
    (spawn/fork 1.77 instead of 1.07 in bench/bench_laptop.py)."""
    import subprocess
    import sys

    code = (
        "import sys\nimport grader.cli\nfrom grader.sandbox import prespawn\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


COURSE_TOML = 'secret = "a course secret of some length"\nlevel = "hint"\n[points]\nex1 = 30\n"ex2.dlogits" = 3\n'


@pytest.mark.parametrize("course", ["", COURSE_TOML], ids=["no-course-toml", "course-toml-with-points"])
def test_grade_batch_starts_its_similarity_check_before_torch_is_imported(tmp_path, course):
    """The class is found and compared in a child while torch loads (it takes a core for over a second): the real
    command's path up to early.start, the course policy and the reading of every kind of file included, imports no
    torch. (A course.toml's [points] once imported the catalogue, and with it torch, before the check started.)"""
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "reference", tmp_path / "subs" / "ada")
    if course:
        (tmp_path / "subs" / "course.toml").write_text(course)
    code = (
        "import sys\n"
        "from grader.classroom import early\n"
        "real = early.start\n"
        "def start(*args, **kwargs):\n"
        "    before = 'torch' in sys.modules\n"
        "    got = real(*args, **kwargs)\n"
        "    print(before, 'torch' in sys.modules, [e.student for e in got.entries], got.compared is not None)\n"
        "    got.compared.kill()\n"
        "    raise SystemExit(0)\n"
        "early.start = start\n"
        "from grader.cli.main import main\n"
        f"main(['batch', {str(tmp_path / 'subs')!r}, '--out', {str(tmp_path / 'out')!r}])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert proc.stdout.split() == ["False", "False", "['ada']", "True"], proc.stderr[-2000:]
    reading = "from grader.submissions.notebook import notebook_sources\nimport grader.classroom.reports.similarity\n"
    out = subprocess.run(
        [sys.executable, "-c", reading + "import sys\nprint('torch' in sys.modules)"], capture_output=True, text=True
    )
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_reading_one_folder_does_not_load_the_class_intake():
    """grade exN reads its folder through intake.files: the package must not load intake.finding and its archive
    readers with it (they cost every student command ~5-8 ms)."""
    import subprocess
    import sys

    code = "import sys\nimport grader.submissions.intake.files\n"
    code += "print('grader.submissions.intake.finding' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_no_name_a_package_exports_on_first_use_is_also_one_of_its_modules():
    """Importing a submodule binds its name on the package: a function exported under that name (intake's
    `discover` once lived in intake/discover.py) became the module for whoever imported the package after the
    submodule had been imported directly, and `grade batch` failed with "'module' object is not callable"."""
    import importlib

    for package in ("grader.sandbox", "grader.submissions.intake"):
        module = importlib.import_module(package)
        where = module.__getattr__.__closure__  # the _WHERE map handed to lazy.exports
        names = next(c.cell_contents for c in where if isinstance(c.cell_contents, dict))
        submodules = {p.stem for p in Path(module.__file__).parent.glob("*.py")} | {
            p.parent.name for p in Path(module.__file__).parent.glob("*/__init__.py")
        }
        assert sorted(set(names) & submodules) == [], package
