"""What a stub is: a docstring at most, then only `raise NotImplementedError`; and the stubs as committed."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from grader.spec import parse as bounded

STUB_FILES = ("ex1.py", "ex2.py", "ex3.py", "ex4.py")


def _git(project_root: Path, *args: str) -> subprocess.CompletedProcess | None:
    """Run a read-only git command in project_root; None when git or the repository is not there."""
    try:
        return subprocess.run(["git", "-C", str(project_root), *args], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def committed_stubs(project_root: Path) -> tuple[dict[str, bytes], str]:
    """Return the stub files as committed ({name: bytes}) and where they came from.

    In a git checkout, the stubs are read from HEAD (`git show HEAD:./exercises/ex1.py`), so whatever a
    working copy holds (an instructor's filled-in exercises, say) never ships. Outside one (an unpacked
    source archive), the files in exercises/ are the packaged copy. Either way check_stub() vets them.
    """
    project_root = Path(project_root)
    inside = _git(project_root, "rev-parse", "--is-inside-work-tree")
    if inside is not None and inside.returncode == 0 and inside.stdout.strip() == b"true":
        stubs, missing = {}, []
        for name in STUB_FILES:
            shown = _git(project_root, "show", f"HEAD:./exercises/{name}")
            if shown is None or shown.returncode != 0:
                missing.append(name)
            else:
                stubs[name] = shown.stdout
        if missing:
            raise FileNotFoundError(
                f"{', '.join(missing)} not committed under {project_root / 'exercises'} (git HEAD): commit the stubs"
            )
        return stubs, "git HEAD"
    stubs = {}
    for name in STUB_FILES:
        path = project_root / "exercises" / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the bundle needs every stub")
        stubs[name] = path.read_bytes()
    return stubs, str(project_root / "exercises")


def is_stub_body(body: list) -> bool:
    """Tell whether a function body is a docstring at most, then only `raise NotImplementedError`."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    exc = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def check_stub(name: str, source: bytes, origin: str) -> None:
    """Raise RuntimeError unless a stub file is a docstring, imports and functions that only raise."""
    try:
        tree = bounded.parse(source.decode("utf-8"), filename=name)
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        raise RuntimeError(f"{origin}: {name} is not a valid stub file: {exc}") from None
    filled = [
        f"{node.name} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_stub_body(node.body)
    ]
    allowed = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)
    filled += [
        f"module-level code (line {node.lineno})"
        for k, node in enumerate(tree.body)
        if not isinstance(node, allowed) and not (k == 0 and isinstance(node, ast.Expr))  # the module docstring
    ]
    if filled:
        raise RuntimeError(
            f"{origin}: {name} is not a stub: {', '.join(filled[:5])}{' ...' if len(filled) > 5 else ''} "
            f"does more than raise NotImplementedError"
        )
