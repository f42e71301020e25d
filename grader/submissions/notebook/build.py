"""Turn an exercise's statements into the functions the grader grades, with every line traced to its cell."""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field

from grader.submissions.notebook import layout
from grader.submissions.notebook import messages as msg
from grader.submissions.notebook import names as nm
from grader.submissions.notebook.layout import EX4_GRADS, FUNCTIONS, Parsed, Unit
from grader.truth import names as fixture  # the model's names, without torch

BATCH = ("Xb", "Yb", "n")
INPUTS = {
    "ex1": frozenset((*fixture.FORWARD_NAMES, *fixture.PARAM_NAMES, *BATCH)),
    "ex4": frozenset((*fixture.EX4_FORWARD_NAMES, *fixture.PARAM_NAMES, *BATCH)),
}
INPUTS["ex2"] = INPUTS["ex3"] = INPUTS["ex1"]
ERROR_CLASS = "NotebookError"  # the runner shows this exception's message as the whole item message
PREAMBLE = (
    f"class {ERROR_CLASS}(Exception):",
    '    """A notebook statement the grader could not turn into a gradient function."""',
    "",
)


@dataclass
class Context:
    """What the whole notebook offers every exercise: imports, top-level defs, names bound anywhere."""

    imports: list[Unit] = field(default_factory=list)
    imported: set[str] = field(default_factory=set)
    blocked: dict[str, str] = field(default_factory=dict)  # name -> module the sandbox refuses
    defs: dict[str, Unit | None] = field(default_factory=dict)  # found by find_def()
    parameters: list[str] | None = None  # the notebook's `parameters = [C, W1, ...]`
    parsed: list[Parsed] = field(default_factory=list)  # every cell, for where_bound()
    def_cells: dict | None = None  # layout.def_index(parsed), made on the first find_def()

    def find_def(self, name: str) -> Unit | None:
        """Return the notebook's top-level def of a name (found once), or None."""
        if name not in self.defs:
            if self.def_cells is None:
                self.def_cells = layout.def_index(self.parsed)
            self.defs[name] = layout.find_def(self.parsed, name, self.def_cells)
        return self.defs[name]

    def where_bound(self, name: str) -> str | None:
        """Return the first cell that binds a name (parsing the cells skipped so far), or None."""
        units = (u for p in self.parsed for u in layout.load(p).units)
        return next((u.cell.label for u in units if name in u.names_bound), None)


def _allowed(module: str, names: tuple[str, ...] = ()) -> bool:
    """Return whether the sandbox lets a submission import this module (and these names from it, for `from`)."""
    from grader.sandbox import child

    if module in child.STAND_INS:  # `from sys import stderr` is; `from sys import exc_info` is not
        return all(name in child.STAND_INS[module] for name in names)
    return module in child.ALLOWED_IMPORTS


def context(parsed: list[Parsed]) -> Context:
    """Collect the notebook's imports, defs and bound names."""
    ctx, seen = Context(parsed=parsed), set()
    for p in parsed:
        for u in p.units:
            node = u.node
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                bound = [(a.asname or a.name).split(".")[0] for a in node.names]
                if node.__class__ is ast.ImportFrom and node.level:
                    modules = [""]
                names = tuple(a.name for a in node.names) if isinstance(node, ast.ImportFrom) else ()
                if all(_allowed(m, names) for m in modules):
                    if "\n".join(u.lines) not in seen:
                        seen.add("\n".join(u.lines))
                        ctx.imports.append(u)
                    ctx.imported |= set(bound)
                else:
                    ctx.blocked.update({b: m for b, m in zip(bound, modules * len(bound), strict=False)})
            targets = getattr(node, "targets", [])
            parameters = any(isinstance(t, ast.Name) and t.id == "parameters" for t in targets)
            if parameters and isinstance(node.value, (ast.List, ast.Tuple)):
                elts = [e.id if isinstance(e, ast.Name) else None for e in node.value.elts]
                if elts and all(e in fixture.PARAM_NAMES for e in elts):
                    ctx.parameters = elts
    ctx.blocked = {k: v for k, v in ctx.blocked.items() if k not in ctx.imported}
    return ctx


@dataclass
class Function:
    """One generated function: its statements, its parameters, or the reason it cannot be built."""

    name: str
    units: list[Unit] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    defs: list[Unit] = field(default_factory=list)
    returns: str = ""
    problem: str = ""
    problem_unit: Unit | None = None


MAX_HELPERS = 300  # helper statements pulled into one function: a real one needs a handful


def _helper_index(pool: list[Unit], inline: frozenset = frozenset()) -> dict[str, list[Unit]]:
    """Index the simple helper statements of a pool by each name they bind, in notebook order.

    inline: gradient names the exercise computes from its own cells (Ex3's dbnraw, ...), whose statements are
    helpers too.
    """
    index: dict[str, list[Unit]] = {}
    for u in pool:
        if u.is_simple:
            for name in u.bound or [w for w in u.writes if w in inline and len(u.writes) == 1]:
                index.setdefault(name, []).append(u)
    return index


def _latest_before(units: list[Unit], order: float) -> Unit | None:
    """Return the last of units (in notebook order) that comes before order."""
    return next((u for u in reversed(units) if u.order < order), None)


def _resolve(
    fn: Function, provided: frozenset, pool: list[Unit], ctx: Context, ex4: bool, inline: frozenset = frozenset()
) -> None:
    """Pull in the helper statements and defs the statements need; name the rest as parameters or a problem."""
    defs: dict[str, Unit] = {}
    index, chosen, added_count = _helper_index(pool, inline), set(map(id, fn.units)), 0
    while added_count < MAX_HELPERS:
        missing = _missing(fn.units, provided, ctx, defs)
        added = False
        for unit, name in missing:
            helper = _latest_before(index.get(name, []), unit.order)
            if helper is not None and id(helper) not in chosen:
                bisect.insort(fn.units, helper, key=lambda u: u.order)
                chosen.add(id(helper))
                added = True
                break
            if name not in defs and ctx.find_def(name) is not None:
                defs[name] = ctx.find_def(name)
                added = True
                break
        if not added:
            break
        added_count += 1
    else:
        fn.problem = msg.TOO_MANY_HELPERS.format(where=fn.units[-1].where, name=fn.name, count=MAX_HELPERS)
        fn.problem_unit = fn.units[-1]
        return
    fn.defs = sorted(defs.values(), key=lambda u: u.order)
    for unit, name in missing:
        if name in ctx.blocked:
            text = msg.BLOCKED.format(where=unit.where, code=unit.code, name=name, module=ctx.blocked[name])
        elif ex4 and name in nm.GRADIENT_NAMES:
            text = msg.NO_ASSIGN.format(where=unit.where, code=unit.code, name=name)
        elif (other := ctx.where_bound(name)) is not None and other != unit.cell.label:
            text = msg.OUTSIDE.format(where=unit.where, code=unit.code, name=name, other=other)
        else:
            text = msg.UNDEFINED.format(where=unit.where, code=unit.code, name=name)
        fn.problem, fn.problem_unit = text, unit
        return
    seen: set[str] = set()
    for unit in fn.units:
        fn.params += [r for r in unit.reads if r in provided and r not in seen and r not in fn.params]
        seen |= set(unit.names_bound)


def _missing(units: list[Unit], provided: frozenset, ctx: Context, defs: dict) -> list[tuple[Unit, str]]:
    """Return (statement, name) for every name read that nothing before it binds."""
    defined = set(ctx.imported) | set(defs)
    out = []
    for unit in units:
        for name in unit.reads:
            if name not in defined and name not in provided and name not in ctx.imported:
                out.append((unit, name))
        defined |= set(unit.names_bound)
    for d in list(defs.values()):
        out += [(d, r) for r in d.reads if r not in defs and ctx.find_def(r) is not None]
    return out


def gradient_function(
    grad: str, cells: list[Parsed], ctx: Context, provided: frozenset, inline: frozenset = frozenset()
) -> Function | None:
    """Build one gradient's function from its statements in order (a fresh `dX = ...` starts it again).

    inline: other gradients the function computes from the cells' own statements instead of asking for them.
    """
    pool = [u for p in cells for u in p.units]
    chain: list[Unit] = []
    for u in pool:
        if grad not in u.writes or u.placeholder:
            continue
        if u.fresh(grad):
            chain = [u]
        else:
            chain.append(u)  # not [*chain, u]: a cell of 100,000 `dC += ...` lines made that quadratic
    if not chain:
        return None
    fn = Function(grad, list(chain), returns=grad)
    double = next((u for u in chain if len(u.writes) > 1), None)
    if double is not None:
        shown = " and ".join(f"`{w}`" for w in double.writes)
        text = msg.TWO_AT_ONCE.format(where=double.where, code=double.code, names=shown, first=grad)
        fn.problem, fn.problem_unit = text, double
        return fn
    if not chain[0].fresh(grad):
        fn.problem = msg.UPDATE_FIRST.format(where=chain[0].where, code=chain[0].code, name=grad)
        fn.problem_unit = chain[0]
        return fn
    helpers = [u for u in pool if not u.writes or (grad not in u.writes and set(u.writes) <= inline)]
    _resolve(fn, provided - {grad}, helpers, ctx, ex4=False, inline=inline)
    return fn


def backward_function(cell: Parsed, block: list[Unit], ctx: Context) -> Function | None:
    """Build Ex4's backward from the manual-backprop statements of the training loop."""
    chosen = [u for u in block if (u.writes and not u.placeholder) or nm.autograd_call(u.node) or "grads" in u.bound]
    if not any(u.writes for u in chosen):
        return None
    grads_unit = next((u for u in reversed(chosen) if "grads" in u.bound), None)
    if grads_unit is not None:
        keys = ctx.parameters and ["d" + p for p in ctx.parameters]
        value = grads_unit.node.value if isinstance(grads_unit.node, ast.Assign) else None
        if not keys and isinstance(value, (ast.List, ast.Tuple)):
            named = [e.id if isinstance(e, ast.Name) else None for e in value.elts]
            keys = named if all(n in EX4_GRADS for n in named) else None
        returns = f"dict(zip({list(keys or EX4_GRADS)!r}, grads))"
    else:
        written = {w for u in chosen for w in u.writes}
        returns = "{" + ", ".join(f"{g!r}: {g}" for g in EX4_GRADS if g in written) + "}"
    fn = Function("backward", chosen, returns=returns)
    # helpers: the block's own, and the loop's forward values (`bndiff = hprebn - bnmean`) the backprop reads
    helpers = [u for u in [*layout.training_forward(cell), *block] if u.is_simple and not u.writes]
    _resolve(fn, INPUTS["ex4"], helpers, ctx, ex4=True)
    return fn


def defined_functions(cells: list[Parsed], exercise: str) -> dict[str, Unit]:
    """Return the exercise's functions the cells define with `def` (the stub's own layout), last one wins."""
    return {u.node.name: u for p in cells for u in p.units if u.is_def and u.node.name in FUNCTIONS[exercise]}
