"""What one statement reads and writes: free names in source order, gradients assigned or updated."""

from __future__ import annotations

import ast
import builtins

from grader.truth import names as fixture  # the model's names, without torch

# every name a gradient can have: d<var> for each forward variable and parameter of either forward pass
KNOWN_VARS = {*fixture.EX1_ORDER, *fixture.FORWARD_NAMES, *fixture.EX4_FORWARD_NAMES, *fixture.PARAM_NAMES} - {"loss"}
GRADIENT_NAMES = frozenset("d" + v for v in KNOWN_VARS)
BUILTINS = frozenset(dir(builtins))
AUTOGRAD_CALLS = ("backward", "grad")  # x.backward(), torch.autograd.grad(...)


def _bound_inside(node: ast.AST) -> set[str]:
    """Return every name a piece of code binds for itself: loop targets, comprehension variables, args, defs."""
    bound = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound.add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in sub.names}
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            bound.add(sub.name)
    return bound


def _loads(parts) -> list[ast.Name]:
    names = [n for part in parts for n in ast.walk(part) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return sorted(names, key=lambda n: (n.lineno, n.col_offset))


def reads(stmt: ast.stmt) -> list[str]:
    """Return the names a statement reads from outside itself, first use first, without builtins."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = [stmt.value] if stmt.value is not None else []
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        bound = set().union(*(_bound_inside(v) for v in value))
        names = [n.id for n in _loads([*targets, *value]) if n.id not in bound]
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            names.insert(0, stmt.target.id)
    else:
        bound = _bound_inside(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.discard(stmt.name)
        names = [n.id for n in _loads([stmt]) if n.id not in bound]
    return [n for n in dict.fromkeys(names) if n not in BUILTINS]


def _target_names(target: ast.expr) -> tuple[list[str], list[str]]:
    """Return (names bound, names written through) by an assignment target: `x` binds x, `x[i]` writes x."""
    if isinstance(target, ast.Name):
        return [target.id], []
    if isinstance(target, (ast.Tuple, ast.List)):
        bound, through = [], []
        for elt in target.elts:
            b, t = _target_names(elt.value if isinstance(elt, ast.Starred) else elt)
            bound += b
            through += t
        return bound, through
    base = target
    while isinstance(base, (ast.Subscript, ast.Attribute)):
        base = base.value
    return [], [base.id] if isinstance(base, ast.Name) else []


def _statements(stmt: ast.stmt):
    """Yield a statement and every statement nested in it, without entering nested defs."""
    yield stmt
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    children = [*getattr(stmt, "body", []), *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]
    for handler in getattr(stmt, "handlers", []):
        children += handler.body
    for case in getattr(stmt, "cases", []):
        children += case.body
    for child in children:
        if isinstance(child, ast.stmt):
            yield from _statements(child)


def _in_place(value) -> list[str]:
    """Return [x] when an expression is an in-place method call on a name: `x.index_add_(...)`."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        method = value.func
        if method.attr.endswith("_") and not method.attr.startswith("_") and isinstance(method.value, ast.Name):
            return [method.value.id]
    return []


def binds(stmt: ast.stmt) -> tuple[list[str], list[str]]:
    """Return (names bound, names written through indexing or an in-place method) by a statement and its body."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name], []
    bound, through = [], []
    for sub in _statements(stmt):
        targets = []
        if isinstance(sub, ast.Assign):
            targets = sub.targets
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [sub.target]
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append(sub.name)
        through += _in_place(getattr(sub, "value", None))
        for t in targets:
            b, w = _target_names(t)
            bound += b
            through += w
    return list(dict.fromkeys(bound)), list(dict.fromkeys(through))


def gradient_writes(stmt: ast.stmt) -> list[str]:
    """Return the gradient names a statement assigns, updates or writes into, in order."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    bound, through = binds(stmt)
    return [n for n in dict.fromkeys(bound + through) if n in GRADIENT_NAMES]


def is_placeholder(stmt: ast.stmt) -> bool:
    """Return whether a statement only sets gradients to None (the lecture's `dlogits = None # TODO`)."""
    if not isinstance(stmt, ast.Assign):
        return False
    values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) else [stmt.value]
    return all(isinstance(v, ast.Constant) and v.value is None for v in values)


def is_stub_def(stmt: ast.stmt) -> bool:
    """Return whether a def does nothing but raise NotImplementedError (the released stub, pasted in a cell)."""
    from grader.spec.stubs import is_stub_body

    return isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_stub_body(stmt.body)


def is_fresh(stmt: ast.stmt, name: str, read: list[str] | None = None) -> bool:
    """Return whether a statement gives `name` a new value without reading the old one (`dX = ...`)."""
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return False
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    plain = any(isinstance(t, ast.Name) and t.id == name for t in targets)
    return plain and name not in (reads(stmt) if read is None else read)


def autograd_call(stmt: ast.stmt) -> bool:
    """Return whether a statement is an autograd call on its own: `loss.backward()`."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in AUTOGRAD_CALLS
    )


def assigns(stmt: ast.stmt, name: str) -> bool:
    """Return whether a simple statement binds `name` (`loss = ...`)."""
    if isinstance(stmt, ast.Assign):
        return any(name in _target_names(t)[0] for t in stmt.targets)
    return isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and name in _target_names(stmt.target)[0]
