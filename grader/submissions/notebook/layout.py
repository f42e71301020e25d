"""Which statements of a notebook belong to which exercise: parse cells, read markers, classify each cell."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property

from grader.spec import parse as bounded
from grader.submissions.notebook import names as nm
from grader.submissions.notebook.cells import Cell
from grader.truth import names as fixture  # the model's names, without torch

EX1_GRADS = tuple("d" + v for v in fixture.EX1_ORDER)
EX1_ONLY = frozenset(EX1_GRADS) - {"dlogits", "dhprebn"}
EX4_GRADS = fixture.EX4_GRADS
FUNCTIONS = {"ex1": EX1_GRADS, "ex2": ("dlogits",), "ex3": ("dhprebn",), "ex4": ("backward",)}
# Cell text is the student's, read by the grader itself: every pattern here must take linear time. `\s*#?\s*`
# backtracked quadratically on a long run of spaces, `#[^\n]*?` on a line of '#', and `^\s*` with MULTILINE on
# blank lines (each line start rescanned all of them): 30,000 '#' in one cell took 35 s.
_MARKER_TEXT = re.compile(r"\bexercise\s*(?:#\s*)?([1-4])\b", re.IGNORECASE)
_EXERCISE_WORD = re.compile(r"\bexercise", re.IGNORECASE)
_GRADIENT_WORD = re.compile(r"\b(?:" + "|".join(sorted(nm.GRADIENT_NAMES)) + r")\b")
_EAGER = re.compile(_GRADIENT_WORD.pattern + r"|^[ \t]*parameters[ \t]*=", re.MULTILINE)
_IMPORT_LINE = re.compile(r"^(?:import|from)\s[^\n]*$", re.MULTILINE)
_LOOKS_LIKE_GRADIENT = re.compile(r"^[ \t]*(d\w+)[ \t]*(?:\[[^\n]*\])?[ \t]*[-+*/]?=(?!=)", re.MULTILINE)


@dataclass(eq=False)
class Unit:
    """One statement of a cell; what it reads and writes is worked out when first asked."""

    node: ast.stmt
    cell: Cell
    order: float  # position in the whole notebook
    first: int  # its first line in the cell
    lines: list[str]  # its source, dedented

    @cached_property
    def names_bound(self) -> list[str]:
        """Return every name the statement binds (targets, loop variables, a def's name)."""
        return nm.binds(self.node)[0]

    @cached_property
    def writes(self) -> list[str]:
        """Return the gradient names it assigns or writes into."""
        return nm.gradient_writes(self.node) if _GRADIENT_WORD.search("\n".join(self.lines)) else []

    @cached_property
    def reads(self) -> list[str]:
        return nm.reads(self.node)

    @cached_property
    def bound(self) -> list[str]:
        """Return the other names it binds when it is a helper: a simple assignment of no gradient, or a def."""
        if self.is_def or (self.is_simple and not self.writes):
            return [b for b in self.names_bound if b not in nm.GRADIENT_NAMES or self.is_def]
        return []

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

    def fresh(self, name: str) -> bool:
        """Return whether it gives `name` a new value without reading the old one (`dX = ...`)."""
        return nm.is_fresh(self.node, name, self.reads)


@dataclass(eq=False)
class Parsed:
    """One cell after parsing: its top-level statements, its marker, or why it is not Python."""

    cell: Cell
    index: int = 0  # position in the notebook
    units: list[Unit] = field(default_factory=list)
    tree: ast.Module | None = None
    error: str = ""  # SyntaxError text
    error_line: int = 0
    marker: str | None = None  # 'ex2' when a comment or markdown says "Exercise 2"
    block: list[Unit] | None | bool = False  # Ex4's training block, once looked for
    forward: list[Unit] = field(default_factory=list)  # the same loop's statements before `loss = ...`

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


def make_unit(node: ast.stmt, cell: Cell, code_lines: list[str], order: float) -> Unit:
    """Describe one statement."""
    first, lines = source_lines(code_lines, node)
    return Unit(node, cell, order, first, lines)


def _marker(cell: Cell) -> str | None:
    m = _MARKER_TEXT.search(cell.markdown) if cell.markdown else _marker_comment(cell.code)
    return f"ex{m.group(1)}" if m else None


def _marker_comment(code: str) -> re.Match | None:
    """Return the first "Exercise N" that follows a '#' on its own line (a comment naming the exercise)."""
    start = 0
    while start <= len(code):
        end = code.find("\n", start)
        end = len(code) if end < 0 else end
        hash_at = code.find("#", start, end)
        if hash_at >= 0:
            for word in _EXERCISE_WORD.finditer(code, hash_at + 1, end):
                m = _MARKER_TEXT.match(code, word.start())
                if m:
                    return m
        start = end + 1
    return None


def load(p: Parsed) -> Parsed:
    """Parse one cell into its statements (once); a cell that is not Python keeps its error."""
    if p.tree is not None or p.error or not p.cell.code.strip():
        return p
    p.units = []
    try:
        p.tree = bounded.parse(p.cell.code, "this cell")
    except (SyntaxError, ValueError) as exc:
        p.error, p.error_line = getattr(exc, "msg", str(exc)), getattr(exc, "lineno", 0) or 0
        return p
    except (RecursionError, MemoryError):  # nested too deep for the parser
        p.error, p.error_line = "nested too deeply to be read (simplify this expression)", 0
        return p
    code_lines = p.cell.code.splitlines()
    p.units = [make_unit(node, p.cell, code_lines, p.index * 10000 + k) for k, node in enumerate(flatten(p.tree.body))]
    return p


def _imports_only(p: Parsed) -> Parsed:
    """Read just the top-level import lines of a cell that assigns no gradient (the rest is parsed on demand)."""
    code_lines = p.cell.code.splitlines()
    for m in _IMPORT_LINE.finditer(p.cell.code):
        line = p.cell.code.count("\n", 0, m.start()) + 1
        try:
            (node,) = ast.parse(m.group(0)).body
        except (SyntaxError, ValueError):
            return load(p)  # a multi-line import: read the whole cell
        ast.increment_lineno(node, line - 1)
        p.units.append(make_unit(node, p.cell, code_lines, p.index * 10000 + line))
    return p


def parse(cells: list[Cell]) -> list[Parsed]:
    """Parse the cells that assign gradients or the parameter list; of the others, only their imports for now."""
    out = []
    for k, cell in enumerate(cells):
        p = Parsed(cell, index=k, marker=_marker(cell))
        out.append(load(p) if _EAGER.search(cell.code) else _imports_only(p))
    return out


_DEF_NAME = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.MULTILINE)


def def_index(parsed: list[Parsed]) -> dict[str, list[Parsed]]:
    """Return, per name, the cells (in order) with a top-level def or class of that name: one pass over the text."""
    index: dict[str, list[Parsed]] = {}
    for p in parsed:
        for name in dict.fromkeys(m.group(1) for m in _DEF_NAME.finditer(p.cell.code)):
            index.setdefault(name, []).append(p)
    return index


def find_def(parsed: list[Parsed], name: str, index: dict[str, list[Parsed]] | None = None) -> Unit | None:
    """Return the last top-level def or class of that name in the notebook, parsing the cells that have one.

    index: def_index(parsed), so that looking up many names costs one pass (a search of the whole notebook per
    name made a notebook of 3,000 undefined names take minutes).
    """
    cells = (index if index is not None else def_index(parsed)).get(name, [])
    found = None
    for p in cells:
        found = next((u for u in reversed(load(p).units) if u.is_def and u.node.name == name), found)
    return found


def training_block(p: Parsed) -> list[Unit] | None:
    """Return the statements after `loss = ...` in the loop that also assigns gradients (Ex4), or None."""
    if p.block is False:
        p.block = _training_block(p)
    return p.block


def training_forward(p: Parsed) -> list[Unit]:
    """Return the statements before `loss = ...` in the loop training_block() found (none if it found none)."""
    return p.forward if training_block(p) is not None else []


def _training_block(p: Parsed) -> list[Unit] | None:
    found: list = []

    def visit(body: list[ast.stmt], in_loop: bool):
        flat = flatten(body)
        losses = [i for i, s in enumerate(flat) if nm.assigns(s, "loss")]
        if in_loop and losses:
            after = flat[losses[-1] + 1 :]
            if any(nm.gradient_writes(s) and not nm.is_placeholder(s) for s in after):
                found.append((flat[: losses[-1]], after))
        for s in flat:
            for child in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, child, None), list) and not isinstance(s, ast.FunctionDef):
                    visit(getattr(s, child), in_loop or isinstance(s, (ast.For, ast.While, ast.AsyncFor)))

    if p.tree is None or not _GRADIENT_WORD.search(p.cell.code):
        return None
    visit(p.tree.body, False)
    if not found:
        return None
    code_lines = p.cell.code.splitlines()
    base = p.units[0].order if p.units else 0
    before, after = found[-1]
    # the loop's forward statements come just before (between this cell's start and the previous cell's end)
    p.forward = [
        make_unit(node, p.cell, code_lines, base - 1 + (k + 1) / (len(before) + 1)) for k, node in enumerate(before)
    ]
    return [make_unit(node, p.cell, code_lines, base + k / 1000) for k, node in enumerate(after)]


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
        elif content == "ex1" and section == "ex3" and _through(p, "dhprebn", _BATCHNORM_STEPS, {"dhpreact"}):
            content = "ex3"  # Ex3 worked out through BatchNorm's own steps (dbnraw, ...), in Ex3's section
        elif content == "ex1" and section == "ex2" and _through(p, "dlogits", _SOFTMAX_STEPS, set()):
            content = "ex2"  # Ex2 worked out through the loss's own steps (dlogprobs, ...), in Ex2's section
        out[content].append(p)
    return out


# BatchNorm's intermediate gradients between dhpreact and dhprebn (dbnmean as Ex4 names the mean), and its
# parameters' gradients, often worked out in the same cell
_BATCHNORM_STEPS = frozenset("dbnraw dbnvar_inv dbnvar dbndiff2 dbndiff dbnmeani dbnmean dbngain dbnbias".split())


# the loss's intermediate gradients between the loss and dlogits
_SOFTMAX_STEPS = frozenset("dlogprobs dprobs dcounts_sum_inv dcounts_sum dcounts dnorm_logits dlogit_maxes".split())


def _through(p: Parsed, answer: str, steps: frozenset, given: set) -> bool:
    """Return whether a cell computes answer from the given gradients alone, through those intermediate steps."""
    writes = p.writes
    return answer in writes and writes <= steps | {answer} and p.gradient_reads() - writes <= given


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
