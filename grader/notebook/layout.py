"""Which statements of a notebook belong to which exercise: parse cells, read markers, classify each cell."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from grader import fixture
from grader.notebook import names as nm
from grader.notebook.cells import Cell

EX1_GRADS = tuple("d" + v for v in fixture.EX1_ORDER)
EX1_ONLY = frozenset(EX1_GRADS) - {"dlogits", "dhprebn"}
EX4_GRADS = fixture.EX4_GRADS
FUNCTIONS = {"ex1": EX1_GRADS, "ex2": ("dlogits",), "ex3": ("dhprebn",), "ex4": ("backward",)}
_MARKER_COMMENT = re.compile(r"#[^\n]*?\bexercise\s*#?\s*([1-4])\b", re.IGNORECASE)
_MARKER_TEXT = re.compile(r"\bexercise\s*#?\s*([1-4])\b", re.IGNORECASE)
_LOOKS_LIKE_GRADIENT = re.compile(r"^\s*(d\w+)\s*(?:\[[^\n]*\])?\s*[-+*/]?=(?!=)", re.MULTILINE)


@dataclass
class Unit:
    """One statement of a cell, with what it reads and writes."""

    node: ast.stmt
    cell: Cell
    order: int  # position in the whole notebook
    first: int  # its first line in the cell
    lines: list[str]  # its source, dedented
    writes: list[str] = field(default_factory=list)  # gradient names it assigns or writes into
    bound: list[str] = field(default_factory=list)  # other names it binds (a helper value or a def)
    reads: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return self.cell.where(self.first)

    @property
    def code(self) -> str:
        """Return the statement as a message quotes it: its first line, shortened."""
        head = self.lines[0].strip()
        more = len(self.lines) > 1 or len(head) > 90
        return (head[:87] + " ...") if more else head

    @property
    def is_def(self) -> bool:
        return isinstance(self.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))

    @property
    def is_simple(self) -> bool:
        return isinstance(self.node, (ast.Assign, ast.AnnAssign, ast.AugAssign))

    @property
    def placeholder(self) -> bool:
        return nm.is_placeholder(self.node)


@dataclass
class Parsed:
    """One cell after parsing: its top-level statements, its marker, or why it is not Python."""

    cell: Cell
    units: list[Unit] = field(default_factory=list)
    tree: ast.Module | None = None
    error: str = ""  # SyntaxError text
    error_line: int = 0
    marker: str | None = None  # 'ex2' when a comment or markdown says "Exercise 2"

    @property
    def writes(self) -> set[str]:
        """Return the gradient names the cell assigns (placeholders aside) or defines as functions."""
        out = {w for u in self.units if not u.placeholder for w in u.writes}
        out |= {u.node.name for u in self.units if u.is_def}
        return out

    def gradient_reads(self) -> set[str]:
        """Return the gradient names the cell's gradient statements (or gradient defs' parameters) read."""
        out = set()
        for u in self.units:
            if u.writes and not u.placeholder:
                out |= {r for r in u.reads if r in nm.GRADIENT_NAMES and r not in u.writes}
            elif u.is_def and u.node.name in nm.GRADIENT_NAMES and not isinstance(u.node, ast.ClassDef):
                out |= {a.arg for a in u.node.args.args if a.arg in nm.GRADIENT_NAMES}
        return out


def source_lines(code_lines: list[str], node: ast.stmt) -> tuple[int, list[str]]:
    """Return (first line, dedented lines) of a statement, decorators included, other statements on its lines not."""
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    col = node.col_offset if start == node.lineno else len(code_lines[start - 1]) - len(code_lines[start - 1].lstrip())
    end = node.end_lineno or node.lineno
    lines = list(code_lines[start - 1 : end])
    lines[-1] = lines[-1][: node.end_col_offset] if node.end_col_offset is not None else lines[-1]
    out = [lines[0][col:]]
    for line in lines[1:]:
        pad = len(line) - len(line.lstrip())
        out.append(line[min(col, pad) :])
    return start, out


def flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Return a statement list with every `with` block replaced by its body (no_grad and friends)."""
    out = []
    for s in body:
        out += flatten(s.body) if isinstance(s, (ast.With, ast.AsyncWith)) else [s]
    return out


def make_unit(node: ast.stmt, cell: Cell, code_lines: list[str], order: int) -> Unit:
    """Describe one statement."""
    first, lines = source_lines(code_lines, node)
    unit = Unit(node, cell, order, first, lines, writes=nm.gradient_writes(node), reads=nm.reads(node))
    if unit.is_def or (unit.is_simple and not unit.writes):
        unit.bound = [b for b in nm.binds(node)[0] if b not in nm.GRADIENT_NAMES or unit.is_def]
    return unit


def _marker(cell: Cell) -> str | None:
    m = _MARKER_TEXT.search(cell.markdown) if cell.markdown else _MARKER_COMMENT.search(cell.code)
    return f"ex{m.group(1)}" if m else None


def parse(cells: list[Cell]) -> list[Parsed]:
    """Parse every code cell into statements; a cell that is not Python keeps its error."""
    out, order = [], 0
    for cell in cells:
        p = Parsed(cell, marker=_marker(cell))
        if cell.code.strip():
            try:
                p.tree = ast.parse(cell.code)
            except (SyntaxError, ValueError) as exc:
                p.error, p.error_line = getattr(exc, "msg", str(exc)), getattr(exc, "lineno", 0) or 0
            else:
                code_lines = cell.code.splitlines()
                for node in flatten(p.tree.body):
                    p.units.append(make_unit(node, cell, code_lines, order))
                    order += 1
        out.append(p)
    return out


def training_block(p: Parsed) -> list[Unit] | None:
    """Return the statements after `loss = ...` in the loop that also assigns gradients (Ex4), or None."""
    found: list = []

    def visit(body: list[ast.stmt], in_loop: bool):
        flat = flatten(body)
        losses = [i for i, s in enumerate(flat) if nm.assigns(s, "loss")]
        if in_loop and losses:
            after = flat[losses[-1] + 1 :]
            if any(nm.gradient_writes(s) and not nm.is_placeholder(s) for s in after):
                found.append(after)
        for s in flat:
            for child in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, child, None), list) and not isinstance(s, ast.FunctionDef):
                    visit(getattr(s, child), in_loop or isinstance(s, (ast.For, ast.While, ast.AsyncFor)))

    if p.tree is None:
        return None
    visit(p.tree.body, False)
    if not found:
        return None
    code_lines = p.cell.code.splitlines()
    base = p.units[0].order if p.units else 0
    return [make_unit(node, p.cell, code_lines, base + k / 1000) for k, node in enumerate(found[-1])]


def by_content(p: Parsed) -> str:
    """Return the exercise a cell's gradient statements look like, without any marker."""
    writes = p.writes
    if "backward" in writes or training_block(p) is not None:
        return "ex4"
    reads = p.gradient_reads()
    if writes == {"dlogits"} and not reads:
        return "ex2"
    if writes == {"dhprebn"} and reads <= {"dhpreact"}:
        return "ex3"
    return "ex1"


def fits(exercise: str, p: Parsed) -> bool:
    """Return whether a cell assigns anything the exercise grades."""
    writes = p.writes
    if exercise == "ex4":
        return "backward" in writes or bool(writes & set(EX4_GRADS))
    return bool(writes & set(FUNCTIONS[exercise]))


def classify(parsed: list[Parsed]) -> dict[str, list[Parsed]]:
    """Give each cell that assigns gradients to one exercise: its own marker, then content, then its section."""
    out: dict[str, list[Parsed]] = {ex: [] for ex in FUNCTIONS}
    section = None
    for p in parsed:
        own = p.marker
        section = own or section
        if not p.writes:
            continue
        if own and fits(own, p):
            out[own].append(p)
            continue
        content = by_content(p)
        if content == "ex1" and section and section != "ex1" and fits(section, p) and not p.writes & EX1_ONLY:
            content = section
        out[content].append(p)
    return out


def broken_cells(parsed: list[Parsed]) -> dict[str, Parsed]:
    """Return, per exercise, a cell that is not Python but looks like it assigns that exercise's gradients."""
    out, section = {}, None
    for p in parsed:
        section = p.marker or section
        if not p.error:
            continue
        names = {m.group(1) for m in _LOOKS_LIKE_GRADIENT.finditer(p.cell.code)} & nm.GRADIENT_NAMES
        if not names:
            continue
        ex = p.marker or section
        if ex is None:
            ex = "ex2" if names == {"dlogits"} else "ex3" if names == {"dhprebn"} else "ex1"
        out[ex] = p
    return out
