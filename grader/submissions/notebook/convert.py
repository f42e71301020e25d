"""From notebook cells to one `Source` per exercise: the functions the grader already grades."""

from __future__ import annotations

from pathlib import Path

from grader.spec import EXERCISES, SHORTCUT_GRADS
from grader.submissions.notebook import build, layout
from grader.submissions.notebook import messages as msg
from grader.submissions.notebook import names as nm
from grader.submissions.notebook.cells import Cell, code_cell, read_notebook
from grader.submissions.sources import Source


class _Text:
    """Generated Python, with where each line came from."""

    def __init__(self):
        self.lines: list[str] = []
        self.where: list[str] = []

    def add(self, line: str, where: str = ""):
        self.lines.append(line)
        self.where.append(where)

    def unit(self, u: layout.Unit, indent: str = ""):
        for k, line in enumerate(u.lines):
            self.add(indent + line if line.strip() else line, u.cell.where(u.first + k))

    def function(self, fn: build.Function):
        if fn.problem:
            where = fn.problem_unit.where if fn.problem_unit else ""
            self.add(f"def {fn.name}():", where)
            self.add(f"    raise {build.ERROR_CLASS}({fn.problem!r})", where)
        else:
            self.add(f"def {fn.name}({', '.join(fn.params)}):", fn.units[0].where)
            for u in fn.units:
                self.unit(u, "    ")
            self.add(f"    return {fn.returns}", fn.units[-1].where)
        self.add("")


def _label(name: str, cells: list[Cell]) -> str:
    labels = list(dict.fromkeys(c.label for c in cells))
    if all(lb.startswith("cell ") for lb in labels):
        numbers = ", ".join(lb[5:] for lb in labels)
        return f"{name} {'cell' if len(labels) == 1 else 'cells'} {numbers}".strip()
    return f"{name} {', '.join(labels)}".strip()


def _functions(ex: str, cells: list[layout.Parsed], ctx: build.Context) -> tuple[list[build.Function], str, dict]:
    """Return the straight-line functions of one exercise, what they are for the note, and the defs it keeps.

    A def that only raises NotImplementedError (the stub file pasted into a cell) gives way to statements that
    compute the same gradient; with no such statements it stays, and the item is not attempted.
    """
    defined = build.defined_functions(cells, ex)
    real = {k: u for k, u in defined.items() if not nm.is_stub_def(u.node)}
    if ex == "ex4":
        for p in reversed(cells):
            if "backward" in real:
                break
            fn = build.backward_function(p, layout.training_block(p) or p.units, ctx)
            if fn is not None:
                return [fn], "the manual backprop of the training loop", real
        return [], "def backward", defined
    if ex == "ex1":  # each step may ask for the true gradient of any variable before it
        provided, inline = build.INPUTS[ex] | nm.GRADIENT_NAMES, frozenset()
    else:  # Ex2 and Ex3 get only what their one call is given; other gradients are worked out in their cells
        provided = build.INPUTS[ex] | frozenset(SHORTCUT_GRADS[ex])
        inline = frozenset(nm.GRADIENT_NAMES) - provided
    fns = [build.gradient_function(g, cells, ctx, provided, inline) for g in layout.FUNCTIONS[ex] if g not in real]
    fns = [f for f in fns if f is not None]
    kept = {k: u for k, u in defined.items() if k in real or all(f.name != k for f in fns)}
    count = len(fns) + len(kept)
    what = ex == "ex1" and f"{count} of {len(layout.EX1_GRADS)} gradients" or layout.FUNCTIONS[ex][0]
    return fns, what, kept


def _exercise(ex, cells, ctx, name, path) -> tuple[Source | None, list[str], list[Cell]]:
    """Return an exercise's Source, its notes and the cells it was built from (none: no cell gives it)."""
    fns, what, defined = _functions(ex, cells, ctx)
    if not fns and not defined:
        return None, [], []
    text = _Text()
    text.add(f"# {ex}, converted by the grader from the notebook's cells")
    for imp in ctx.imports:
        text.unit(imp)
    text.add("")
    for line in build.PREAMBLE:
        text.add(line)
    helper_defs = {d.order: d for fn in fns for d in fn.defs if d.node.name not in defined}
    for d in sorted(helper_defs.values(), key=lambda u: u.order):
        text.unit(d)
        text.add("")
    for fn in fns:
        text.function(fn)
    for d in defined.values():
        text.unit(d)
        text.add("")
    used = [u.cell for fn in fns for u in fn.units] + [u.cell for u in defined.values()]
    used += [u.cell for u in helper_defs.values()]
    order = {id(p.cell): k for k, p in enumerate(cells)}
    used_cells = sorted(set(used), key=lambda c: (order.get(id(c), -1), c.label))
    label = _label(name, used_cells)
    source = Source(ex, f"{path}[{ex}]", "\n".join(text.lines) + "\n", label, tuple(text.where + [""]))
    notes = [msg.GRADED.format(exercise=ex, label=label, what=what)]
    unplaced = sum(1 for fn in fns if fn.problem)
    if unplaced:
        notes.append(msg.UNPLACED.format(exercise=ex, count=unplaced))
    return source, notes, used_cells


def _short(code: str) -> str:
    """Return a line as a message quotes it: stripped, and shortened past 90 characters."""
    code = code.strip()
    return code if len(code) <= 90 else code[:87] + " ..."


def _broken_source(ex: str, p: layout.Parsed, name: str, path: str) -> Source:
    """Return an exercise whose cell is not Python: loading it raises the one message naming the cell and line.

    The runner shows a NotebookError's message as it is, once for the whole exercise; a cell handed over as it is
    would be called a file that cannot be read, under the exercise file's name.
    """
    lines = p.cell.code.splitlines()
    where = p.cell.where(p.error_line) if p.error_line else p.cell.label
    code = _short(lines[p.error_line - 1]) if 0 < p.error_line <= len(lines) else ""
    at = msg.BROKEN_AT_LINE.format(where=where, code=code) if code else where
    text = msg.BROKEN_CELL.format(at=at, error=p.error[:200], exercise=ex)
    body = [f"# {ex}: {p.cell.label} is not valid Python", *build.PREAMBLE, f"raise {build.ERROR_CLASS}({text!r})"]
    return Source(ex, f"{path}[{ex}]", "\n".join(body) + "\n", _label(name, [p.cell]), tuple([where] * len(body)))


def _file_order(cells: list[Cell]) -> str | None:
    """Return the note for a saved notebook whose cells ran out of order (a cell run before one above it)."""
    top = None  # the code cell above with the highest execution count
    for cell in cells:
        if cell.count is None:
            continue
        if top is not None and cell.count < top.count:
            return msg.FILE_ORDER.format(above=top.count, above_cell=top.label, below=cell.count, below_cell=cell.label)
        if top is None or cell.count > top.count:
            top = cell
    return None


def _kernel_order(used: dict[str, list[Cell]]) -> str | None:
    """Return the note for a kernel whose history ran an exercise's cells after a later exercise's cells."""
    found = [ex for ex in EXERCISES if used.get(ex)]
    for k, ex in enumerate(found):
        late = max(used[ex], key=lambda c: c.count or 0)
        for other in found[k + 1 :]:
            early = min(used[other], key=lambda c: c.count or 0)
            if (late.count or 0) > (early.count or 0):
                return msg.KERNEL_ORDER.format(
                    late=late.label,
                    late_exercise=f"Exercise {ex[2:]}",
                    early=early.label,
                    early_exercise=f"Exercise {other[2:]}",
                )
    return None


def sources_from_cells(
    cells: list[Cell], name: str = "", path: str = "<notebook>", *, kernel: bool = False
) -> tuple[dict, list[str]]:
    """Return ({exercise: Source}, notes) for a notebook's cells in order; never raises on a student's code.

    kernel: the cells are a kernel's history, in the order they ran (a saved notebook's are top to bottom).
    """
    parsed = layout.parse(cells)
    ctx = build.context(parsed)
    groups = layout.classify(parsed)
    broken = layout.broken_cells(parsed)
    position = {id(p): k for k, p in enumerate(parsed)}
    sources, notes, used, said = {}, [], {}, set()
    for ex in EXERCISES:
        cells_ex = groups[ex]
        bad = broken.get(ex)
        if bad is not None and all(position[id(c)] < position[id(bad)] for c in cells_ex):
            sources[ex] = _broken_source(ex, bad, name, path)  # said once, by the exercise's items
            used[ex], said = [bad.cell], said | {id(bad)}
            continue
        source, ex_notes, used[ex] = _exercise(ex, cells_ex, ctx, name, path)
        notes += ex_notes
        if source is None:
            notes.append(msg.NOT_FOUND.format(exercise=ex, names=msg.WANTED[ex]))
        else:
            sources[ex] = source
    skipped = []
    for p in parsed:
        if p.error and id(p) not in said:  # a cell not Python that no exercise's items speak of
            where = p.cell.where(p.error_line) if p.error_line else p.cell.label
            skipped.append(msg.SYNTAX.format(where=where, error=p.error))
    order = _kernel_order(used) if kernel else _file_order(cells)
    return sources, ([order] if order else []) + skipped + notes


def notebook_sources(path: Path) -> tuple[dict[str, Source], list[str]]:
    """Return ({exercise: Source}, notes) for an .ipynb file; an unreadable file gives no sources and a note."""
    path = Path(path)
    try:
        cells = read_notebook(path)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds of errors on a broken file
        return {}, [msg.UNREADABLE.format(error=f"{type(exc).__name__}: {exc}"[:300])]
    try:
        return sources_from_cells(cells, path.name, str(path.resolve()))
    except (RecursionError, MemoryError) as exc:  # code nested too deeply for the converter's own walks
        return {}, [msg.UNREADABLE.format(error=f"{type(exc).__name__}: the code is nested too deeply")]


def history_sources(inputs: list[str], numbers: list[int] | None = None) -> tuple[dict[str, Source], list[str]]:
    """Return ({exercise: Source}, notes) for a kernel's input history, each input labelled 'In [k]'."""
    numbers = numbers or list(range(1, len(inputs) + 1))
    cells = [code_cell(f"In [{k}]", text, k) for k, text in zip(numbers, inputs, strict=True)]
    return sources_from_cells(cells, "", "<kernel>", kernel=True)
