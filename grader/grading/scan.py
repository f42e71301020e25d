"""Flag a submission's reach into interpreter or torch internals, read from its source in the trusted parent.

Tripwires inside a child can be switched off by code running in that child; this scan cannot, because it runs
before any student code and in the grader's own process. It does not change a grade: it is a flag for the
instructor (summary.json, the report), since no honest gradient needs `torch._C`, `sys.modules`, `gc`, frames,
`__subclasses__` or computed attribute names. It is not a trap: traps are recognised from returned values.
"""

from __future__ import annotations

import ast
import functools
import heapq
import re
import unicodedata
from dataclasses import dataclass

# Names that reach outside the exercise: reflection, the import machinery, the interpreter, the OS.
REFLECTIVE_CALLS = frozenset(
    "getattr setattr delattr vars globals locals eval exec compile __import__ memoryview breakpoint".split()
)
RISKY_ATTRIBUTES = frozenset(
    "sys modules os ctypes gc builtins subprocess f_back f_globals f_locals f_code gi_frame cr_frame tb_frame "
    "tb_next get_objects get_referrers get_referents attrgetter methodcaller mro ctypeslib "
    # string.Formatter().get_field("0.name", (obj,), {}) is getattr by a computed name; get_type_hints and
    # singledispatch evaluate string annotations
    "Formatter get_field vformat get_type_hints".split()
)
RISKY_NAMES = frozenset("__builtins__ __loader__ __spec__".split())
# underscored names that are public API, not a reach into internals: super().__init__, type(x).__name__,
# torch.__version__, a namedtuple's _replace / _asdict / _fields
PUBLIC_UNDERSCORED = frozenset(
    "__init__ __name__ __qualname__ __doc__ __version__ _replace _asdict _fields _make _field_defaults".split()
)
_UNDERSCORED = re.compile(r"_+[A-Za-z0-9]\w*")  # "_C", "__globals__"; not "_" (as in "_".join) or "_>10"
_DOTTED = re.compile(r"[\w.]+")
BY_NAME = REFLECTIVE_CALLS | RISKY_ATTRIBUTES  # imported from a module, each reaches attributes by a computed name
# getattr under a longer name (torch.ao.quantization.utils.getattr_from_fqn), and typing's evaluation of string
# annotations (a sandbox allows only plain names there: functools.singledispatch stays usable and unflagged)
_BY_OTHER_NAME = re.compile(r"getattr|attrgetter|ForwardRef", re.IGNORECASE)
# torch's operator registry and compilers: aten's own backward kernels (tanh_backward, embedding_dense_backward,
# native_batch_norm_backward) give a gradient nobody derived, and aten.grad runs autograd itself
TORCH_BACKDOORS = frozenset("ops jit library".split())
BACKWARD_KERNEL = re.compile(r"_backward(?:_|$)")
RISKY_MODULES = frozenset(
    "sys os gc ctypes inspect importlib types builtins subprocess signal socket pickle marshal copyreg pkgutil dis "
    "serialization".split()  # torch.serialization.pickle.loads resolves a dotted name, getattr included
)
# what those modules offer to reach an object by a computed name, whatever the module is called here
_REFLECTION = frozenset("getmembers getmembers_static import_module unwrap loads find_class".split())


@dataclass(frozen=True)
class Flag:
    """One reach into internals: where, what, and the line."""

    exercise: str
    line: int
    what: str
    code: str

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "line": self.line, "what": self.what, "code": self.code}


def _trigger() -> re.Pattern:
    words = sorted(REFLECTIVE_CALLS | RISKY_ATTRIBUTES | RISKY_NAMES | RISKY_MODULES | TORCH_BACKDOORS | _REFLECTION)
    # an attribute after a dot, a name, an import (a star too), a match pattern (`case object(__globals__=g)`),
    # a "_string",
    # a backward kernel's name
    return re.compile(
        r"\.[\s\\]*_|\b(?:" + "|".join(map(re.escape, words)) + r")\b|import\s+_|import\s*\*|from\s+_|\bcase\b|['\"]_"
        r"|_backward|getattr|attrgetter|ForwardRef"
    )


FLAGGED = (
    "flagged for your instructor (no points change): your code reaches into private or interpreter internals, "
    "which a derivation never needs: {where}. Compute each gradient from the inputs your function is given."
)


def flagged_note(flags: list[dict], shown: int = 5) -> str:
    """Return the line a student's table ends with when their files reach into internals ('' when they do not)."""
    if not flags:
        return ""
    where = "; ".join(f"{f['exercise']}.py line {f['line']}: {f['what']}" for f in flags[:shown])
    return FLAGGED.format(where=where + ("; ..." if len(flags) > shown else ""))


TRIGGER = _trigger()  # every flag below needs one of these in the text; most honest files have none


@functools.lru_cache(maxsize=256)
def scan(exercise: str, text: str, limit: int = 20) -> tuple[Flag, ...]:
    """Return the places where a source file reaches into private or interpreter internals."""
    if not TRIGGER.search(unicodedata.normalize("NFKC", text)):  # identifiers are NFKC-normalised: ＿C is _C
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()  # a file that does not parse fails on its own, in the sandbox
    fstring_parts = frozenset(id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values)
    found = ((getattr(node, "lineno", 0), what) for node in ast.walk(tree) if (what := _what(node, fstring_parts)))
    first = heapq.nsmallest(limit, found)  # a 1 MB line of `'_',` holds 260,000 flags: keep `limit` of them...
    lines = text.splitlines()
    # ... and quote only those: a copy of that line per flag took minutes
    return tuple(Flag(exercise, line, what, _quote(lines, line)) for line, what in first)


def _quote(lines: list[str], line: int) -> str:
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""


def _what(node: ast.AST, fstring_parts: frozenset = frozenset()) -> str | None:
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_") and node.attr not in PUBLIC_UNDERSCORED:
            return f"private attribute .{node.attr}"
        if node.attr in RISKY_ATTRIBUTES or node.attr in RISKY_MODULES or node.attr in _REFLECTION:
            return f"interpreter internals .{node.attr}"  # torch.inspect, torch.serialization.pickle: a module
        if node.attr in TORCH_BACKDOORS:
            return f"torch's operator registry or compiler .{node.attr}"
        if BACKWARD_KERNEL.search(node.attr):
            return f"torch's own backward kernel .{node.attr}"
        if _BY_OTHER_NAME.search(node.attr):
            return f"reflection by another name: .{node.attr[:40]}"
    elif isinstance(node, ast.Name):
        if node.id in REFLECTIVE_CALLS:
            return f"reflection {node.id}()"
        if _BY_OTHER_NAME.search(node.id):
            return f"reflection by another name: {node.id[:40]}"
        if node.id in RISKY_NAMES:
            return f"interpreter internals {node.id}"
    elif isinstance(node, ast.MatchClass):  # `case object(__globals__=g)` reads an attribute too
        risky = [a for a in node.kwd_attrs if a.startswith("_") or a in RISKY_ATTRIBUTES]
        if risky:
            return f"attribute read by a match pattern: {risky[0]}"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # g["__builtins__"], getattr by name
        word = node.value
        if word == "__main__" or id(node) in fstring_parts:  # `if __name__ == "__main__":`, f"{name}_direct"
            return None
        if _UNDERSCORED.fullmatch(word) or word in RISKY_ATTRIBUTES | RISKY_NAMES | RISKY_MODULES | REFLECTIVE_CALLS:
            return f"a string naming internals: {word[:40]!r}"
        if "._" in word and _DOTTED.fullmatch(word):  # a path to something private ("torch._C._EngineBase")
            return f"a string naming internals: {word[:40]!r}"
        if word in TORCH_BACKDOORS or BACKWARD_KERNEL.search(word):
            return f"a string naming torch internals: {word[:40]!r}"
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        private = [n for n in names if any(part.startswith("_") and part != "__future__" for part in n.split("."))]
        if private:
            return f"private module {private[0]}"
        risky = [n for n in names if n.split(".")[0] in RISKY_MODULES]
        if risky:
            return f"interpreter module {risky[0]}"
        if isinstance(node, ast.ImportFrom):  # `from operator import attrgetter as pick`: getattr by another name
            reached = [
                a.name
                for a in node.names
                if a.name in BY_NAME or _BY_OTHER_NAME.search(a.name) or (a.name == "*" and node.module == "operator")
            ]
            if reached:
                return f"reflection imported by name: {reached[0]}"
    return None
