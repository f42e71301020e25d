"""A notebook as a list of cells: Python code with IPython syntax blanked out, or markdown."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from grader.submissions.intake.files import (
    MAX_NOTEBOOK_BYTES,  # intake's cap: a notebook it reads is never refused here
)

MAX_CODE_LINES = 20_000  # lines of code (and `;`-separated statements) in one notebook; the lecture's has ~500
PYTHON_CELL_MAGICS = ("time", "timeit", "capture", "prun")  # %%magics whose body is still Python
_LINE_MAGIC = re.compile(r"^(\s*)(?:[%!]|[\w.\[\]]+\s*=\s*[%!])")
_HELP = re.compile(r"^(\s*)[\w.]+\?{1,2}\s*$")


@dataclass(frozen=True)
class Cell:
    """One cell: its Python (empty for markdown), its markdown text, and how a message names it."""

    label: str  # 'cell 14' in a notebook file, 'In [12]' in a kernel's history
    code: str = ""
    markdown: str = ""
    magic: str = ""  # the %%magic that makes this cell something other than Python
    count: int | None = None  # its execution count: In [k] of a saved notebook, or k of a kernel's history

    def where(self, line: int) -> str:
        """Return how a message names a line of this cell: 'cell 14, line 3'."""
        return f"{self.label}, line {line}"


def python_of(text: str) -> tuple[str, str]:
    """Return (Python, cell magic): IPython's `%magic`, `!shell` and `x?` lines become `pass`, keeping lines."""
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split(maxsplit=1)[0] if lines[0].strip() != "%%" else ""
        if magic not in PYTHON_CELL_MAGICS:
            return "", magic or "%%"
        lines[0] = ""
    out = []
    for line in lines:
        m = _LINE_MAGIC.match(line) or _HELP.match(line)
        out.append(f"{m.group(1)}pass" if m else line)
    return "\n".join(out) + ("\n" if out else ""), ""


def code_cell(label: str, text: str, count: int | None = None) -> Cell:
    """Return a code cell from its raw text (count: its In [k], when it ran)."""
    code, magic = python_of(text)
    return Cell(label, code, magic=magic, count=count)


def _statements(code: str) -> int:
    """Return a cheap upper bound on a cell's statements: its lines of code (not blank, not comments) and `;`s."""
    return sum(1 for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")) + code.count(";")


def read_notebook(path: Path) -> list[Cell]:
    """Read an .ipynb with nbformat; cells are numbered from 1, markdown included, as they appear on screen."""
    import nbformat

    raw = Path(path).read_bytes()[: MAX_NOTEBOOK_BYTES + 1]
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    with warnings.catch_warnings():  # a notebook written without cell ids is read all the same: no stderr noise
        warnings.simplefilter("ignore")
        nb = nbformat.reads(raw.decode("utf-8-sig", errors="replace"), as_version=nbformat.NO_CONVERT)
    if nb.get("nbformat", 4) < 4:
        nb = nbformat.convert(nb, 4)
    cells = []
    for k, cell in enumerate(nb.get("cells", []), start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "code":
            count = cell.get("execution_count")
            count = count if isinstance(count, int) and not isinstance(count, bool) else None
            cells.append(code_cell(f"cell {k}", source, count))
        else:
            cells.append(Cell(f"cell {k}", markdown=source))
    lines = sum(_statements(c.code) for c in cells)
    if lines > MAX_CODE_LINES:  # parsing costs ~1 GB per MB of `1;1;1;...`: refused before any parse
        raise ValueError(
            f"holds {lines:,} lines or statements of code; at most {MAX_CODE_LINES:,} are read: submit the "
            f"notebook with only the lecture's cells and your answers"
        )
    return cells
