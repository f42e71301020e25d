"""Flag a submission's reach into interpreter or torch internals, read from its source in the trusted parent.

Tripwires inside a child can be switched off by code running in that child; this scan cannot, because it runs
before any student code and in the grader's own process. It does not change a grade: it is a flag for the
instructor (summary.json, the report), since no honest gradient needs `torch._C`, `sys.modules`, `gc`, frames,
`__subclasses__` or computed attribute names. It is not a trap: traps are recognised from returned values.
What a file defines itself is not internals: its classes' private attributes and `*_backward` methods (unless
torch or the interpreter has a name like it), `self.__class__.__name__`, a function's local named `vars`.
"""

from __future__ import annotations

import ast
import functools
import heapq
import pkgutil
import re
import unicodedata
from dataclasses import dataclass

from grader.sandbox.mainblock import main_blocks
from grader.sandbox.standins import STAND_INS
from grader.spec import parse as bounded

# Names that reach outside the exercise: reflection, the import machinery, the interpreter, the OS.
REFLECTIVE_CALLS = frozenset(
    "getattr setattr delattr vars globals locals eval exec compile __import__ memoryview breakpoint".split()
)
RISKY_ATTRIBUTES = frozenset(
    "sys modules os ctypes gc builtins subprocess f_back f_globals f_locals f_code gi_frame cr_frame tb_frame "
    "tb_next get_objects get_referrers get_referents attrgetter methodcaller mro ctypeslib "
    # every frame reachable from a coroutine or generator, and the real builtins (getattr) a frame holds;
    # numpy's stride tricks, which read raw memory at any address
    "f_builtins ag_frame ag_code gi_code cr_code f_trace stride_tricks as_strided "
    # string.Formatter().get_field("0.name", (obj,), {}) is getattr by a computed name; get_type_hints and
    # singledispatch evaluate string annotations
    "Formatter get_field vformat get_type_hints "
    # frames by other names (logging.currentframe, traceback.walk_stack through logging.traceback); autograd's own
    # backward formulas as plain Python (torch.export.default_decompositions(), torch._decomp's tables)
    "currentframe walk_stack walk_tb StackSummary extract_stack extract_tb traceback "
    "default_decompositions decomposition_table core_aten_decompositions get_decompositions".split()
)
RISKY_NAMES = frozenset("__builtins__ __loader__ __spec__".split())
# the buffer protocols C code reads from any object: defining one (a method, a property, a class attribute, a key)
# lets numpy or torch read any address as an array of object references, so no name of the file's own is exempt
RAW_MEMORY = frozenset(
    "__array_interface__ __array_struct__ __cuda_array_interface__ __dlpack__ __dlpack_device__ __buffer__".split()
)
# underscored names that are public API, not a reach into internals: super().__init__, type(x).__name__,
# torch.__version__, a namedtuple's _replace / _asdict / _fields
PUBLIC_UNDERSCORED = frozenset(
    "__init__ __name__ __qualname__ __doc__ __version__ _replace _asdict _fields _make _field_defaults".split()
)
# dunders that, read, give what a builtin gives anyone unflagged: x.__class__ is type(x) (self.__class__(...) makes
# another of the file's own objects), x.__repr__() is repr(x), x.__str__() is str(x), f.__module__ a module's name
READ_LIKE_BUILTINS = frozenset("__class__ __repr__ __str__ __module__".split())
_UNDERSCORED = re.compile(r"_+[A-Za-z0-9]\w*")  # "_C", "__globals__"; not "_" (as in "_".join) or "_>10"
_DOTTED = re.compile(r"[\w.]+")
_FIELD_PATH = re.compile(r"\{\w*(?:\.\w+){2,}|\{\w*\.\w+\[|\{\w*\[[^\]]*\]\.")  # {0.a.b}, {0.a[k]}, {0[k].a}
BY_NAME = REFLECTIVE_CALLS | RISKY_ATTRIBUTES  # imported from a module, each reaches attributes by a computed name
# getattr under a longer name (torch.ao.quantization.utils.getattr_from_fqn), and typing's evaluation of string
# annotations (a sandbox allows only plain names there: functools.singledispatch stays usable and unflagged)
_BY_OTHER_NAME = re.compile(r"getattr|attrgetter|ForwardRef", re.IGNORECASE)
# torch's operator registry and compilers: aten's own backward kernels (tanh_backward, embedding_dense_backward,
# native_batch_norm_backward) give a gradient nobody derived, and aten.grad runs autograd itself
TORCH_BACKDOORS = frozenset("ops jit library".split())
BACKWARD_KERNEL = re.compile(r"_backward(?:[_.]|$)")  # tanh_backward, "native_batch_norm_backward.default"
RISKY_MODULES = frozenset(
    "sys os gc ctypes inspect importlib types builtins subprocess signal socket pickle marshal copyreg pkgutil dis "
    "serialization".split()  # torch.serialization.pickle.loads resolves a dotted name, getattr included
)
# what those modules offer to reach an object by a computed name, whatever the module is called here
# (torch.fx's Interpreter.fetch_attr(root, "sys.modules") walks a dotted name with getattr)
_REFLECTION = frozenset("getmembers getmembers_static import_module unwrap loads find_class fetch_attr".split())


# Routes out of the exercise with no use in any derivation: a frame (and through it the real builtins), raw memory
# at any address, the interpreter's object graph, attributes read by a format string's field path. Autograd's own
# formulas are reachable through each, whatever the child's tripwires, so a file that holds one is not run at all.
ESCAPES = RAW_MEMORY | frozenset(
    "f_builtins f_back f_globals f_locals f_code f_trace gi_frame cr_frame ag_frame tb_frame tb_next gi_code cr_code "
    "ag_code _getframe currentframe walk_stack walk_tb StackSummary extract_stack extract_tb traceback __traceback__ "
    "stride_tricks Formatter get_field vformat get_objects get_referrers get_referents ctypes ctypeslib "
    "__builtins__ __globals__ __subclasses__ __code__ __closure__ "
    "default_decompositions decomposition_table core_aten_decompositions get_decompositions".split()
)
# string's Formatter is getattr by a computed name; logging's is a log line's layout
_STRING_ONLY = frozenset({"Formatter"})
# risky as an attribute (logging.traceback, the module), an everyday word as a string ({"traceback": ...})
_ATTRIBUTE_ONLY = frozenset({"traceback"})


@dataclass(frozen=True)
class Flag:
    """One reach into internals: where, what, and the line; escape: a route out that keeps the file from running."""

    exercise: str
    line: int
    what: str
    code: str
    escape: bool = False

    def to_dict(self) -> dict:
        out = {"exercise": self.exercise, "line": self.line, "what": self.what, "code": self.code}
        return {**out, "escape": True} if self.escape else out


@functools.cache
def _trigger() -> re.Pattern:
    """Return the pattern every flag below needs in the text (most honest files have none); compiled on first use,
    not on import (~1 ms): `grade exN` first needs it while it waits for its sandbox and the truth."""
    words = sorted(
        REFLECTIVE_CALLS | RISKY_ATTRIBUTES | RISKY_NAMES | RISKY_MODULES | TORCH_BACKDOORS | _REFLECTION | RAW_MEMORY
    )
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


@functools.lru_cache(maxsize=256)
def scan(exercise: str, text: str, limit: int = 20) -> tuple[Flag, ...]:
    """Return the places where a source file reaches into private or interpreter internals."""
    found = ((getattr(node, "lineno", 0), what, id(node), node) for node, what in _running(text))
    first = heapq.nsmallest(limit, found, key=lambda f: f[:3])  # a 1 MB line of `'_',` holds 260,000 flags...
    lines = parser_lines(text) if first else []
    # ... keep `limit` of them, and quote only those: a copy of that line per flag took minutes
    return tuple(Flag(exercise, line, what, _quote(lines, line), _escape(node)) for line, what, _, node in first)


@functools.lru_cache(maxsize=256)
def escapes(exercise: str, text: str, limit: int = 5) -> tuple[Flag, ...]:
    """Return the first routes out of the exercise (ESCAPES) a file holds: such a file is refused, not run."""
    found = ((getattr(node, "lineno", 0), what, id(node)) for node, what in _running(text) if _escape(node))
    first = heapq.nsmallest(limit, found)
    lines = parser_lines(text) if first else []
    return tuple(Flag(exercise, line, what, _quote(lines, line), True) for line, what, _ in first)


@functools.lru_cache(maxsize=8)
def _running(text: str) -> tuple:
    """Return (node, what) for every flagged node of a file that can run when the grader loads it.

    Code under `if __name__ == "__main__":` never runs then: a student's own test code there (a traceback, a
    frame, a function's __code__) is neither flagged nor refused, as long as nothing else in the file is flagged
    (reflection that runs could make the block run) and no statement assigns __name__.
    """
    flagged = tuple(_flagged(text))
    main = _main_lines(_parsed(text)) if flagged else set()
    if not main or any(getattr(node, "lineno", 0) not in main for node, _ in flagged):
        return flagged
    return ()


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> ast.Module | None:
    """Return a file's tree when a flag is possible at all (scan and escapes read the same one), else None."""
    if not _trigger().search(unicodedata.normalize("NFKC", text)):  # identifiers are NFKC-normalised: ＿C is _C
        return None
    try:
        return bounded.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # a file that does not parse fails on its own, in the sandbox


def _flagged(text: str):
    """Yield (node, what) for every flagged node of a file (nothing for most honest files, which are not parsed)."""
    tree = _parsed(text)
    if tree is None:
        return
    fstring_parts = frozenset(id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values)
    own = _Lazy(tree)  # built only for a file whose flags it could lift
    formats = "format" in text  # str.format, format_map, string.Formatter().vformat: what evaluates a field path
    spelled_out, written_out = _spelled_out(tree, fstring_parts, own, formats)
    spelled_out |= _own_locals(tree)
    yield from written_out  # getattr(f, "__globals__") is refused as f.__globals__ is
    docstrings = frozenset(
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
        and isinstance(n.body[0].value.value, str)
    )
    for node in ast.walk(tree):
        what = None if id(node) in spelled_out else _what(node, fstring_parts, own, formats, docstrings)
        if what:
            yield node, what


def _spelled_out(tree: ast.Module, fstring_parts: frozenset, own: _Lazy, formats: bool) -> tuple[set[int], list]:
    """Read `getattr`/`setattr`/`delattr` called with a literal name as the attribute written out; return the ids of
    the calls' names that reach no more than it would (`getattr(x, "shape", None)` is `x.shape` with a default),
    and (written-out attribute, what) for each that is a route out, refused as `f.__globals__` is."""
    harmless, routes_out = set(), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "setattr", "delattr") or len(node.args) < 2 or node.keywords:
            continue
        name = node.args[1]
        if any(isinstance(a, ast.Starred) for a in node.args) or not isinstance(name, ast.Constant):
            continue
        if isinstance(name.value, str) and name.value.isidentifier():
            ctx = {"getattr": ast.Load, "setattr": ast.Store, "delattr": ast.Del}[node.func.id]()
            written_out = ast.copy_location(ast.Attribute(value=node.args[0], attr=name.value, ctx=ctx), node)
            what = _what(written_out, fstring_parts, own, formats)
            if what is None:  # neither the call nor its literal name: getattr(x, "__class__") is x.__class__
                harmless.update((id(node.func), id(name)))
            elif _escape(written_out):
                routes_out.append((written_out, what))
    return harmless, routes_out


def _own_locals(tree: ast.Module) -> set[int]:
    """Return the ids of `locals()` and `vars()` called bare in the body of a function, class or comprehension:
    that scope's own names (`"{x} {y}".format(**locals())`). At module level they are the module's globals (a
    computed key could set `__name__` and run the __main__ block), and so they are in what a scope evaluates in
    the enclosing one (a default, an annotation, a decorator, a base, a comprehension's first iterable); passed
    uncalled (`f(locals)`) they read whichever frame calls them. All of those stay flagged."""
    found: set[int] = set()
    todo = [(node, False) for node in tree.body]
    while todo:
        node, inside = todo.pop()
        if inside and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
            if node.func.id in ("locals", "vars") and not node.keywords:
                found.add(id(node.func))
        own = _own_parts(node)
        mine = {id(child) for child in own}
        todo += [(child, inside) for child in ast.iter_child_nodes(node) if id(child) not in mine]
        todo += [(child, True) for child in own]
    return found


def _own_parts(node: ast.AST) -> list:
    """Return what a scope (a def, lambda, class or comprehension) evaluates in its own namespace."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        first, *rest = node.generators
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return [*elements, first.target, *first.ifs, *rest]
    return []


REFUSED = (
    "Not run: {where} reaches outside the exercise ({what}: `{code}`). The grader runs no code that reads frames, "
    "raw memory or the interpreter's own objects; no derivation needs them. Remove it and grade again."
)


def refused_message(flag: Flag, where: str) -> str:
    """Return the error every item of a refused file gets; where: 'ex2.py line 7' or the notebook cell's line."""
    return REFUSED.format(where=where, what=flag.what, code=flag.code[:120])


def _main_lines(tree: ast.Module | None) -> set[int]:
    """Return the lines of the file's top-level `if __name__ == "__main__":` blocks: none if the name __name__
    is bound anywhere, in any form (an assignment, `except E as __name__`, an import alias, a def, a match
    pattern, a global), since the block could then run."""
    if tree is None:
        return set()
    lines: set[int] = set()
    blocks = main_blocks(tree)  # the child compiles their tests as False (grader/sandbox/mainblock.py)
    for node in blocks:
        lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines if blocks and _bindings_of_name(tree) == 0 else set()


def _bindings_of_name(tree: ast.AST) -> int:
    """Count the places a file could bind the module global __name__ (an attribute's .__name__ is another thing);
    reading it (`logging.getLogger(__name__)`) binds nothing."""
    count = 0
    for n in ast.walk(tree):
        names: list = []
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            names = [n.id]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)):
            names = [n.name]
        elif isinstance(n, ast.alias):
            names = [n.name, n.asname]
        elif isinstance(n, ast.arg):
            names = [n.arg]
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)):
            names = [n.name]
        elif isinstance(n, ast.MatchMapping):
            names = [n.rest]
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names = list(n.names)
        count += sum(1 for name in names if name == "__name__")
    return count


def _escape(node: ast.AST) -> bool:
    """Whether a flagged node is a route out (ESCAPES), in any of its forms."""
    if _raw_memory(node):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr in ESCAPES
    if isinstance(node, ast.Name):
        return node.id in ESCAPES
    if isinstance(node, ast.Constant):  # a string reaches nothing without getattr or format, flagged on their own;
        return False  # only a buffer-protocol name (a class made with type(...)) is one, above
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        return any(part in ESCAPES for n in names for part in n.split("."))
    if isinstance(node, ast.MatchClass):
        return any(a in ESCAPES for a in node.kwd_attrs)
    return False


def _raw_memory(node: ast.AST) -> str | None:
    """Return the buffer-protocol name a node defines or names, whatever its form; None for any other node."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RAW_MEMORY:
        return node.name
    if isinstance(node, ast.Name) and node.id in RAW_MEMORY:
        return node.id
    if isinstance(node, ast.Attribute) and node.attr in RAW_MEMORY:
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in RAW_MEMORY:
        return node.value
    return None


_FIELD = re.compile(r"\{([^{}]*)\}")
_SEGMENT = re.compile(r"[A-Za-z_]\w*")


def _risky_field(word: str) -> bool:
    """Whether a replacement field of a string reaches internals: a private name, the interpreter's modules, a frame.

    "{d.shape[0]}", "{0.dtype.itemsize}", "{0.__class__.__name__}" or a class's own "{self._n}" in a print or a
    .format call read what anyone may; "{0.sys.modules[...]}" or "{0.__globals__}" walk to the interpreter's state.
    """
    for field in _FIELD.findall(word):
        for name in _SEGMENT.findall(field.split("!")[0].split(":")[0]):
            dunder = _DUNDER.fullmatch(name) is not None and name not in PUBLIC_UNDERSCORED | READ_LIKE_BUILTINS
            if dunder or name in RISKY_ATTRIBUTES or name in RISKY_MODULES or name in REFLECTIVE_CALLS:
                return True
    return False


_PARSER_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def parser_lines(text: str, keepends: bool = False) -> list[str]:
    """Return a text's lines as the parser numbers them: only \\n, \\r\\n and \\r end one (str.splitlines also splits
    at \\f, \\x1c and others, which would misnumber every line after one)."""
    lines = _PARSER_LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


def _quote(lines: list[str], line: int) -> str:
    return lines[line - 1].strip()[:200] if 0 < line <= len(lines) else ""


def _what(
    node: ast.AST,
    fstring_parts: frozenset = frozenset(),
    own: _Lazy | None = None,
    formats: bool = True,
    docstrings: frozenset = frozenset(),
) -> str | None:
    """Return what a node reaches that a derivation never needs, or None. formats: whether the file could format a
    string at all (a field path in a file that never formats is inert text); docstrings: the ids of the file's
    docstrings, text for readers that names a kernel or `_C` harmlessly (only a field path in one is read)."""
    raw = _raw_memory(node)
    if raw:
        return f"raw memory: {raw} (C code reads any address through it)"
    if isinstance(node, ast.Attribute):
        read = node.attr in READ_LIKE_BUILTINS and isinstance(node.ctx, ast.Load)  # not `x.__class__ = Other`,
        # nor its spelling setattr(x, "__class__", Other) (written out with the Store context)
        private = node.attr.startswith("_") and node.attr not in PUBLIC_UNDERSCORED and not read
        kernel = BACKWARD_KERNEL.search(node.attr) is not None
        mine = (private or kernel) and own is not None and own.get().defines(node)  # the file's own class's name
        if private and not mine:
            return f"private attribute .{node.attr}"
        string_module = isinstance(node.value, ast.Name) and node.value.id == "string"
        from_string = node.attr not in _STRING_ONLY or string_module
        if (node.attr in RISKY_ATTRIBUTES and from_string) or node.attr in RISKY_MODULES or node.attr in _REFLECTION:
            return f"interpreter internals .{node.attr}"  # torch.inspect, torch.serialization.pickle: a module
        if node.attr in TORCH_BACKDOORS:
            return f"torch's operator registry or compiler .{node.attr}"
        if kernel and not mine:
            return f"torch's own backward kernel .{node.attr}"
        if _BY_OTHER_NAME.search(node.attr):
            return f"reflection by another name: .{node.attr[:40]}"
    elif isinstance(node, ast.Name):
        if node.id in REFLECTIVE_CALLS and not (own is not None and id(node) in own.get().local_names):
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
        if id(node) in docstrings:  # """Same formula as torch's tanh_backward.""": read as a format string only
            field = formats and _FIELD_PATH.search(word) and _risky_field(word)
            return f"a format string reading attributes by name: {word[:40]!r}" if field else None
        risky = RISKY_ATTRIBUTES - _ATTRIBUTE_ONLY
        if _UNDERSCORED.fullmatch(word) or word in risky | RISKY_NAMES | RISKY_MODULES | REFLECTIVE_CALLS:
            return f"a string naming internals: {word[:40]!r}"
        if "._" in word and _DOTTED.fullmatch(word):  # a path to something private ("torch._C._EngineBase")
            return f"a string naming internals: {word[:40]!r}"
        # "{0.sys.modules[grader...]}".format(torch) is getattr by name
        if formats and _FIELD_PATH.search(word) and _risky_field(word):
            return f"a format string reading attributes by name: {word[:40]!r}"
        if word in TORCH_BACKDOORS or BACKWARD_KERNEL.search(word):
            return f"a string naming torch internals: {word[:40]!r}"
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        private = [n for n in names if any(part.startswith("_") and part != "__future__" for part in n.split("."))]
        if private:
            return f"private module {private[0]}"
        if isinstance(node, ast.ImportFrom) and node.module in STAND_INS:  # `from sys import stderr`: its stand-in
            beyond = [a.name for a in node.names if a.name not in STAND_INS[node.module]]
            if beyond:
                return f"interpreter internals {node.module}.{beyond[0]}"
            return None
        risky = [n for n in names if n.split(".")[0] in RISKY_MODULES and n not in STAND_INS]
        if risky:
            return f"interpreter module {risky[0]}"
        if isinstance(node, ast.ImportFrom):  # `from operator import attrgetter as pick`: getattr by another name
            reached = [
                a.name
                for a in node.names
                if (a.name in BY_NAME and (a.name not in _STRING_ONLY or node.module == "string"))
                or _BY_OTHER_NAME.search(a.name)
                or (a.name == "*" and node.module == "operator")
            ]
            if reached:
                return f"reflection imported by name: {reached[0]}"
    return None


# --- what a file defines itself ----------------------------------------------------------------------------------
# An honest file has its own classes (`self._saved`, `self._cache`, a `tanh_backward` method, `__repr__` with
# `self.__class__.__name__`) and its own locals (`vars = bnvar + eps`). Those names are the student's, not the
# interpreter's or torch's, so they raise no flag; everything else is read as before.

# Where the private names worth reaching live: torch's entry points, autograd's, the interpreter's objects. A
# file's class may define `_saved`; it cannot make `_C` or `_execution_engine` its own by defining them, since a
# method called with another object as `self` (`K.peek(torch)`) would read the real one.
_INTERNAL_HOLDERS = (
    "torch torch._C torch._C._VariableFunctions torch._C._nn torch._C._autograd torch._C._functions "
    "torch._C.TensorBase torch.Tensor torch.autograd torch.autograd.variable torch.autograd.variable.Variable "
    "torch.autograd.graph torch.autograd.function torch.autograd.function.Function torch.autograd.grad_mode "
    "torch.autograd.forward_ad torch.autograd.functional torch.nn torch.nn.functional torch.func torch.library "
    "torch.utils torch.jit torch.overrides"
).split()
_DUNDER = re.compile(r"__\w+__")


@functools.lru_cache(maxsize=1)
def _internal_names() -> frozenset[str]:
    """Return the private names (and backward kernels) of torch's and the interpreter's entry points."""
    import builtins
    import string
    import sys
    import types
    import typing

    import torch

    holders: list = [builtins, sys, type, object, functools.partial, string.Formatter, typing.ForwardRef]
    holders += [getattr(types, n) for n in dir(types) if n.endswith("Type") and isinstance(getattr(types, n), type)]
    for path in _INTERNAL_HOLDERS:
        obj = torch
        for part in path.split(".")[1:]:
            obj = getattr(obj, part, None)
        if obj is not None:
            holders.append(obj)
    names = set()
    for holder in holders:
        try:
            names.update(n for n in dir(holder) if n.startswith("_") or "backward" in n)
        except Exception:  # noqa: BLE001 - a holder that cannot list itself adds nothing
            continue
    for package in (torch, torch.autograd, torch.nn, torch.utils):  # submodules, imported or not: the same set always
        names.update(m.name for m in pkgutil.iter_modules(getattr(package, "__path__", [])) if m.name.startswith("_"))
    return frozenset(names)


class _Lazy:
    """A file's _Own, built on first use."""

    def __init__(self, tree: ast.AST):
        self.tree, self.own = tree, None

    def get(self) -> _Own:
        if self.own is None:
            self.own = _Own(self.tree)
        return self.own


class _Scope:
    """One scope of the file: the module, a class body, a function or lambda, a comprehension."""

    __slots__ = ("kind", "bound", "globals", "nonlocals", "self_name")

    def __init__(self, kind: str, self_name: str | None = None):
        self.kind, self.self_name = kind, self_name  # self_name: a method's first parameter
        self.bound: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Own:
    """The names a file defines itself: its classes' attributes, and the locals that shadow a reflective builtin.

    One pass over the tree with Python's own scope rules: a name bound anywhere in a function (a parameter, an
    assignment, a loop target ...) is that function's local everywhere in it (read before the binding, it raises
    UnboundLocalError, never falls back to the builtin), and so is a name a nested function reads from it. At module
    or class level a name read before its binding is the builtin, so those stay flagged.
    """

    def __init__(self, tree: ast.AST):
        self.attributes: set[str] = set()  # what the file's classes define: methods, class attributes, self.<x> = ...
        self.local_names: set[int] = set()  # ids of Name nodes that are a function's own local
        self.class_names: set[int] = set()  # ids of `.__class__` nodes read only for their __name__
        reads: list[tuple[ast.Name, tuple]] = []
        classes: list[_Scope] = []
        module = _Scope("module")
        stack: list[tuple[ast.AST, tuple]] = [(tree, (module,))]
        while stack:
            node, chain = stack.pop()
            scope = chain[-1]
            if isinstance(node, (*_FUNCTIONS, ast.Lambda)):
                args = node.args
                outer = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                outer += [p.annotation for p in params if p is not None and p.annotation is not None]
                self_name = None
                if isinstance(node, _FUNCTIONS):
                    scope.bound.add(node.name)
                    outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
                    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
                    first = [*args.posonlyargs, *args.args][:1]
                    if scope.kind == "class" and first and not static:
                        self_name = first[0].arg
                inner = _Scope("function", self_name)
                inner.bound.update(p.arg for p in params if p is not None)
                body = node.body if isinstance(node.body, list) else [node.body]
                stack += [(n, chain) for n in outer] + [(n, (*chain, inner)) for n in body]
                continue
            if isinstance(node, ast.ClassDef):
                scope.bound.add(node.name)
                inner = _Scope("class")
                stack += [(n, chain) for n in (*node.bases, *node.keywords, *node.decorator_list)]
                stack += [(n, (*chain, inner)) for n in node.body]
                classes.append(inner)
                continue
            if isinstance(node, _COMPREHENSIONS):
                inner = _Scope("comprehension")
                first, *rest = node.generators
                stack.append((first.iter, chain))  # the first iterable is evaluated outside
                parts = [first.target, *first.ifs, *rest] + (
                    [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
                )
                stack += [(n, (*chain, inner)) for n in parts]
                continue
            if isinstance(node, ast.NamedExpr):  # binds in the nearest scope that is not a comprehension
                target = next(s for s in reversed(chain) if s.kind != "comprehension")
                target.bound.add(node.target.id)
                if node.target.id in REFLECTIVE_CALLS:
                    reads.append((node.target, chain[: chain.index(target) + 1]))
                stack.append((node.value, chain))
                continue
            if isinstance(node, ast.Name):
                if not isinstance(node.ctx, ast.Load):
                    scope.bound.add(node.id)
                if node.id in REFLECTIVE_CALLS:
                    reads.append((node, chain))
            elif isinstance(node, ast.Global):
                scope.globals.update(node.names)
            elif isinstance(node, ast.Nonlocal):
                scope.nonlocals.update(node.names)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                scope.bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                scope.bound.add(node.name)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                scope.bound.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                scope.bound.add(node.rest)
            elif isinstance(node, ast.Attribute):
                value = node.value
                if isinstance(node.ctx, ast.Store) and isinstance(value, ast.Name) and value.id == scope.self_name:
                    self.attributes.add(node.attr)  # self._saved = ... in a method of the file's own class
                if node.attr in ("__name__", "__qualname__") and isinstance(value, ast.Attribute):
                    if value.attr == "__class__":
                        self.class_names.add(id(value))
            stack += [(n, chain) for n in ast.iter_child_nodes(node)]
        for cls in classes:
            self.attributes |= cls.bound
        for name, chain in reads:
            if _is_local(name.id, chain):
                self.local_names.add(id(name))

    def defines(self, node: ast.Attribute) -> bool:
        """Whether `x.attr` reads a name the file's own classes define (and no internal one), or a class's name."""
        attr = node.attr
        if id(node) in self.class_names:  # self.__class__.__name__: a string, nothing else
            return True
        if attr not in self.attributes or _DUNDER.fullmatch(attr):
            return False
        return attr not in _internal_names()


def _is_local(name: str, chain: tuple) -> bool:
    """Whether `name`, read in the innermost scope of chain, is a function's local (never the builtin)."""
    for k, scope in enumerate(reversed(chain)):
        if scope.kind == "module" or (scope.kind == "class" and k == 0):
            return False  # read at module or class level: the builtin until bound
        if scope.kind == "class":
            continue  # a class body's names are not visible in its methods
        if name in scope.globals:
            return False  # the module's name: the builtin until bound there
        if name in scope.nonlocals:
            continue  # an enclosing function's local
        if name in scope.bound:
            return True
    return False


# --- the gradient computed numerically -------------------------------------------------------------------------
# A gradient derived by hand never needs complex numbers, nor the loss evaluated twice and differenced: complex-step
# and finite-difference differentiation compute the gradient numerically from the forward pass. Also a flag for the
# instructor, not a grade.
NUMERIC = (
    "flagged for your instructor (no points change): your code computes a gradient numerically instead of deriving "
    "it: {where}. Derive each gradient with the chain rule."
)
_COMPLEX_NAMES = frozenset("complex complex32 complex64 complex128 cfloat cdouble chalf view_as_complex imag".split())


_PERTURBED_CALL = re.compile(r"\w\([^()\n]*[\w\])]\s*[+-]\s*[\w(]")  # f(a, x + h ...: a call with a nudged argument
_COMPLEX_TEXT = re.compile(r"\d[jJ]\b|complex|cfloat|cdouble|chalf|\bimag\b")
_LOOP_TEXT = re.compile(r"\b(?:for|while)\b")
# A difference divided, `(a - b) / h`: the subtraction needs its parentheses, so `)` then `/`, with only spaces,
# line breaks and whole comments between (a comment holds no `)`, so no two matches scan the same text)
_DIVIDED = re.compile(r"\)(?:[\s\\]|#[^\n)]*\n)*/(?!/)")
# ... or a line that starts with `/`: after a comment that holds a `)`, or in column 0 (where a block would end)
_LINE_DIVIDES = re.compile(r"^[ \t\f]*/(?!/)", re.MULTILINE)


def numeric(exercise: str, text: str, limit: int = 20) -> tuple[Flag, ...]:
    """Return the places where a source file differentiates numerically (complex step, finite differences)."""
    complex_text = _COMPLEX_TEXT.search(text) is not None
    line_divides = _LINE_DIVIDES.search(text) is not None
    divides = line_divides or _DIVIDED.search(text)
    if not complex_text and not (divides and (_LOOP_TEXT.search(text) or _PERTURBED_CALL.search(text))):
        return ()  # most files: no parse at all
    try:
        trees = [bounded.parse(text)] if complex_text or line_divides else _candidate_blocks(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found = []
    for unit in (u for tree in trees for u in _units(tree)):  # one walk over what can hold one, unit by unit
        bound, divisions, loops = {}, [], False
        for node in ast.walk(unit):
            if complex_text:
                what = _complex(node)
                if what:
                    found.append((getattr(node, "lineno", 0), what))
            if isinstance(node, (ast.For, ast.While, ast.comprehension)):
                loops = True
            elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Call, ast.Tuple)):
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                targets = node.targets[0].elts if isinstance(node.targets[0], (ast.Tuple, ast.List)) else node.targets
                for target, value in zip(targets, values, strict=False):
                    if isinstance(target, ast.Name) and isinstance(value, ast.Call):
                        bound[target.id] = value
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.left, ast.BinOp):
                if isinstance(node.left.op, ast.Sub):
                    divisions.append(node.left)
        function = isinstance(unit, (ast.FunctionDef, ast.AsyncFunctionDef))
        # f at one value nudged two ways, differenced and divided: in a loop (bound names too) or over a basis at once
        if function and _differenced(divisions, bound if loops else {}) and not _test_only(text, unit):
            found.append((unit.lineno, f"a finite difference in {unit.name}() (the forward pass evaluated twice)"))
    lines = parser_lines(text) if found else []
    return tuple(Flag(exercise, line, what, _quote(lines, line)) for line, what in sorted(found)[:limit])


def _test_only(text: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a function is named only in the file's `if __name__ == "__main__":` block: a gradient check the
    student runs by hand (`numgrad` against their derivation), which the grader never runs. Only a plain function
    at the file's top level: a method (`__call__`, reached as `Check()(...)`) or a decorated function
    (`@HELPERS.append`) is reached without its name. Not when anything outside that block is flagged (reflection
    could reach the function by a computed name)."""
    if _DUNDER.fullmatch(fn.name):
        return False
    try:
        tree = bounded.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    main = _main_lines(tree)
    # the whole file's node: fn may come from a block parsed alone, which starts at `def`, after its decorators
    top = [n for n in tree.body if isinstance(n, type(fn)) and (n.name, n.lineno) == (fn.name, fn.lineno)]
    if not main or not top or top[0].decorator_list:
        return False
    if any(getattr(node, "lineno", 0) not in main for node, _ in _flagged(text)):
        return False
    named = re.compile(rf"\b{re.escape(fn.name)}\b")
    own = range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)
    # lines and names as the parser reads them (parser_lines), and ｎｕｍｇｒａｄ is numgrad
    lines = [unicodedata.normalize("NFKC", line) for line in parser_lines(text)]
    uses = [k for k, line in enumerate(lines, 1) if k not in own and named.search(line)]
    return bool(uses) and all(k in main for k in uses)


_BLOCK_START = re.compile(r"(?:async\s+def|def|class)\b")


def _candidate_blocks(text: str) -> list[ast.Module]:
    """Return the parsed top-level functions and classes that hold a division of a parenthesised expression and
    either a loop or a call with a nudged argument (f(x + h ...), at their own lines.

    Only such a function can difference the forward pass: the rest of the file is not parsed (a file of 26
    functions took ~5 ms). A block that does not parse alone (a string running into column 0) falls back to the
    whole file.
    """
    lines = parser_lines(text, keepends=True)
    starts = [k for k, line in enumerate(lines) if _BLOCK_START.match(line)]
    trees = []
    for k in starts:
        end = next((j for j in range(k + 1, len(lines)) if lines[j][:1] not in ("", " ", "\t", "\n", "\r", "#")), None)
        block = "".join(lines[k:end])
        if not _DIVIDED.search(block) or not (_LOOP_TEXT.search(block) or _PERTURBED_CALL.search(block)):
            continue
        try:
            tree = bounded.parse("\n" * k + block)  # parsed at its own lines (increment_lineno walks the tree)
        except SyntaxError:
            return [bounded.parse(text)]
        trees.append(tree)
    return trees


def _units(tree: ast.Module):
    """Yield the file's top-level functions, its classes' methods, and every other top-level statement."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield from node.body
        else:
            yield node


def _complex(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, complex):
        return "a complex number (complex-step differentiation)"
    if isinstance(node, ast.Attribute) and node.attr in _COMPLEX_NAMES:
        return f"complex arithmetic .{node.attr} (complex-step differentiation)"
    if isinstance(node, ast.Name) and node.id == "complex":
        return "complex numbers (complex-step differentiation)"
    return None


def _differenced(divisions: list[ast.BinOp], bound: dict[str, ast.Call]) -> bool:
    """Tell whether one of these differences is of two calls of one function at one value nudged two ways:
    (f(x + h) - f(x - h)) / (2 * h), or f(x + h) against f(x). A difference of two different functions
    (softmax - one_hot), or of one function at two unrelated values (norm(mine) - norm(ref)), is no such thing."""

    def call(e: ast.AST) -> ast.Call | None:
        return e if isinstance(e, ast.Call) else bound.get(e.id) if isinstance(e, ast.Name) else None

    for diff in divisions:
        a, b = call(diff.left), call(diff.right)
        if a is not None and b is not None and ast.dump(a.func) == ast.dump(b.func) and ast.dump(a) != ast.dump(b):
            if any(_nudged(x, y) for x, y in zip(a.args, b.args, strict=False)):
                return True
    return False


def _nudged(x: ast.AST, y: ast.AST) -> bool:
    """Whether two arguments are one value moved two ways: x + d and x - d, or x + d and x."""

    def base(e: ast.AST) -> str | None:
        return ast.dump(e.left) if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)) else None

    bx, by = base(x), base(y)
    if ast.dump(x) == ast.dump(y) or (bx is None and by is None):
        return False
    return (bx or ast.dump(x)) == (by or ast.dump(y))


def numeric_note(flags: list[dict], shown: int = 3) -> str:
    """Return the line a student's table ends with when their files differentiate numerically ('' otherwise)."""
    if not flags:
        return ""
    where = "; ".join(f"{f['exercise']}.py line {f['line']}: {f['what']}" for f in flags[:shown])
    return NUMERIC.format(where=where + ("; ..." if len(flags) > shown else ""))
