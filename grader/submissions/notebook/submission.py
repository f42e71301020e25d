"""What `grade exN --submission PATH` grades when PATH is a notebook, or a folder or archive holding one."""

from __future__ import annotations

from pathlib import Path

from grader.spec import EXERCISES
from grader.submissions.notebook import messages as msg
from grader.submissions.notebook.convert import notebook_sources
from grader.submissions.sources import Submission


def is_notebook(path: Path) -> bool:
    """Return whether a path names a Jupyter notebook file."""
    return path.suffix.lower() == ".ipynb" and not path.name.startswith(".")


def read_notebook_submission(path: Path) -> Submission:
    """Return a notebook's Submission: its exercises' sources and which cells were graded."""
    sources, notes = notebook_sources(path)
    return Submission(path.stem, sources, notes)


def find_notebook_submission(folder: Path) -> tuple[Submission, str] | None:
    """Return the shallowest notebook below folder as a Submission, with a note of what was graded; or None."""
    found = [
        p
        for p in Path(folder).rglob("*.ipynb")
        if is_notebook(p) and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    if not found:
        return None
    path = min(found, key=lambda p: (len(p.relative_to(folder).parts), p.as_posix()))
    sub = read_notebook_submission(path)
    return sub, "\n".join([msg.NOTEBOOK_GRADED.format(name=path.relative_to(folder).as_posix()), *sub.notes])


def notes_for(notes: list[str], exercises) -> list[str]:
    """Return the notes that concern the given exercises (or no exercise in particular)."""
    others = tuple(f"{ex}:" for ex in EXERCISES if ex not in exercises)
    return [n for n in notes if not n.startswith(others)] if others else list(notes)


def cli_submission(path: Path) -> Path | Submission:
    """Return a folder of .py files as is; read a notebook, or a folder or archive holding one, into a Submission."""
    path = Path(path)
    if path.is_file() and is_notebook(path):
        return read_notebook_submission(path)
    if path.is_dir() and any((path / f"{ex}.py").is_file() for ex in EXERCISES):
        return path
    if not path.exists():
        raise ValueError(msg.NO_SUCH_SUBMISSION.format(path=path))
    try:
        from grader.submissions.intake import (
            read_submission,  # folders, archives and notebooks, read without trusting them
        )
    except ImportError:
        read_submission = None
    if read_submission is not None:
        return read_submission(path)
    notebooks = sorted(p for p in path.glob("*.ipynb") if is_notebook(p)) if path.is_dir() else []
    if len(notebooks) == 1:
        return read_notebook_submission(notebooks[0])
    if path.is_dir():
        return path
    raise ValueError(msg.NOT_A_SUBMISSION.format(path=path))
