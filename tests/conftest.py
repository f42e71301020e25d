"""Shared fixtures: paths, a submission builder and one grading of the reference."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference"
EXERCISES = ROOT / "exercises"
CORPUS = Path(__file__).resolve().parent / "corpus"
NAMES_TXT = ROOT.parent / "shared" / "data" / "names.txt"


def make_submission(tmp: Path, files: dict[str, str] | None = None, base: Path | None = REFERENCE) -> Path:
    """Write a throwaway submission: the base folder's files, with some files replaced or appended to."""
    tmp.mkdir(parents=True, exist_ok=True)
    if base is not None:
        for f in base.glob("ex*.py"):
            shutil.copy(f, tmp / f.name)
    for name, text in (files or {}).items():
        (tmp / name).write_text(text)
    return tmp


def with_snippet(tmp: Path, exercise: str, snippet: str) -> Path:
    """Write the reference with a snippet appended to one exercise file (later defs win)."""
    text = (REFERENCE / f"{exercise}.py").read_text() + "\n\n" + snippet
    return make_submission(tmp, {f"{exercise}.py": text})


@pytest.fixture(scope="session")
def reference_result():
    from grader.runner import grade

    return grade(REFERENCE)
