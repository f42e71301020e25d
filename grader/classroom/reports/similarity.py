"""Similarity between submissions, function by function, with copydetect (MOSS-style k-gram fingerprints).

Each exercise file is parsed and normalised, then cut into its top-level functions. Normalising drops docstrings
and no-op statements, undoes wrappers that always run their body once (`if True:`, `while True: ...; break`,
`with contextlib.nullcontext():`, `try: ... except: raise`), and inlines a helper of the same file that one graded
function calls once. copydetect tokenises each function, as ast.unparse writes it, with Pygments and replaces every
name with one symbol, so renaming, reformatting and comments change nothing. Fingerprints of the released stub, of
the course's base code (course.toml's [similarity] base), and those that half the class shares (the one obvious way
to write `dlogits @ W2.T`), are removed before comparing: what a pair shares and most others do not is what counts.
A pair's score is the share of its fingerprinted code that overlaps, over the functions both wrote; a function
where neither version has MIN_FUNCTION fingerprinted characters (a short one-liner) is left out. Every k-gram is
kept (window 1), so the result does not depend on Python's per-process string hashing.

One student's share of the work is bounded: their files are capped in characters and tokens, per function and in
all, before anything is tokenised, and in time. A student past a bound is left out of the comparison, with the
reason (Similarity.not_compared); the rest of the class is compared all the same.

Cost (issue #22; bench/similarity_cost.py times it and checks the result against a saved one). A class writes the
same functions many times over, so each piece of work is done once per distinct input: a file is read once per
text, a function's tokens counted and its fingerprint made (by copydetect) once per normalised text, the common
fingerprints counted once per text, weighted by how many students wrote it, and the comparison made once per pair
of distinct texts of a function (_shares, which gives overlap's numbers; tests/test_similarity_equivalence.py
pins that), the pairs of students then gathering their texts' numbers. Pygments lexes each distinct line of
normalised code once (_LinewisePython: ast.unparse writes no token across lines): on the bench class the check
costs about two thirds of what lexing whole functions did (six interleaved pairs: 0.59-0.82, median 0.67). A
function's lines are mapped back to the student's only when a pair shows it, and for it alone. Python's cyclic
garbage collector is off while a class is compared (compare_class).
"""

from __future__ import annotations

import ast
import bisect
import functools
import gc
import io
import itertools
import math
import operator
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pygments.lexers
from pygments.lexers.python import PythonLexer

from grader.classroom import deadline
from grader.grading.scan import parser_lines
from grader.submissions.intake.read import STUBS


def _jinja_template(*args, **kwargs):
    """jinja2.Template, imported when first called: copydetect's HTML report would call it, the grader never does."""
    from jinja2 import Template

    return Template(*args, **kwargs)


def _import_copydetect():
    """Import copydetect without the matplotlib (~0.3 s) and jinja2 (~0.1 s) it loads for HTML reports the grader
    never makes."""
    stubs = [name for name in ("matplotlib", "matplotlib.pyplot", "jinja2") if name not in sys.modules]
    for name in stubs:
        sys.modules[name] = types.ModuleType(name)
    if "matplotlib" in stubs and "matplotlib.pyplot" in stubs:
        sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]
    if "jinja2" in stubs:
        sys.modules["jinja2"].Template = _jinja_template
    try:
        import copydetect
        import copydetect.utils
    finally:
        for name in stubs:  # a later `import matplotlib` gets the real one
            del sys.modules[name]
    return copydetect


_copydetect = _import_copydetect()
CodeFingerprint = _copydetect.CodeFingerprint
get_token_coverage = _copydetect.utils.get_token_coverage
get_copied_slices = _copydetect.utils.get_copied_slices

UNPARSED = "python, as ast.unparse writes it"  # the language copydetect is told for normalised code (_Lexers)
MEMO_TOKENS = 500_000  # tokens the line-by-line lexer keeps (~50 MB at most); past it, new lines are lexed each time
MEMO_LINE = 400  # characters of the longest line it keeps


class _LinewisePython:
    """Pygments' Python lexer for ast.unparse's output, which writes no token across two lines: lex each line apart,
    and each distinct line once (a class writes the same lines over and over: 727 distinct of 4,837 in the bench
    class). tests/test_similarity_equivalence.py pins the tokens equal to the whole text's on every corpus."""

    def __init__(self):
        self.lexer = PythonLexer()
        self.lines: dict[str, tuple] = {}
        self.kept = 0

    def get_tokens(self, text: str):
        """Yield the (token type, text) pairs Pygments yields for the whole text."""
        if '"""' in text or "'''" in text or "\\\n" in text:  # a docstring or a joined line: lexed whole
            yield from self.lexer.get_tokens(text)
            return
        for line in _NEWLINE.findall(text.strip("\n") + "\n"):  # the whole text's ends, as Pygments trims them
            tokens = self.lines.get(line)
            if tokens is None:
                tokens = tuple(self.lexer.get_tokens(line))
                if len(line) <= MEMO_LINE and self.kept + len(tokens) <= MEMO_TOKENS:
                    self.lines[line] = tokens
                    self.kept += len(tokens)
            yield from tokens


_NEWLINE = re.compile(r"[^\n]*\n")  # Pygments' lines: only \n ends one (unparsed code has no \r)


class _Lexers:
    """pygments.lexers as copydetect's filter_code looks a lexer up: UNPARSED is lexed line by line, "python" by one
    lexer made once (not one per function), any other name as Pygments has it."""

    def __init__(self):
        self.unparsed, self.python = _LinewisePython(), PythonLexer()

    def __getattr__(self, name):
        return getattr(pygments.lexers, name)

    def get_lexer_by_name(self, alias, **options):
        """Return the lexer for alias, as pygments.lexers.get_lexer_by_name does."""
        if not options and alias in (UNPARSED, "python"):
            return self.unparsed if alias == UNPARSED else self.python
        return pygments.lexers.get_lexer_by_name(alias, **options)


_copydetect.utils.lexers = _Lexers()

K = 25  # characters of filtered code per fingerprint (copydetect's default noise threshold)
COMMON_SHARE = 0.5  # a fingerprint that at least half the class has is not evidence...
COMMON_MIN = 5  # ... if at least this many students have it (so a small class keeps its fingerprints)
THRESHOLD = 0.85  # a pair whose score reaches this is listed
MIN_OVERLAP = 200  # ... if it shares at least this many characters of filtered code
SHOWN_FUNCTION = 0.5  # functions this similar are shown side by side in the report
MIN_FUNCTION = 30  # fingerprinted characters under which a function is left out of a score (a short one-liner)

# What one student may hand the fingerprinting; past any of these they are left out of the comparison
MAX_CHARS = 200_000  # characters of their exercise files, checked before parsing
MAX_DEPTH = 100  # levels of one file's syntax tree
MAX_FUNCTIONS = 200  # functions, after inlining
MAX_FUNCTION_CHARS = 30_000  # characters of one function as fingerprinted (an unparsable file is cut to this)
MAX_FUNCTION_TOKENS = 8_000  # tokens (names, numbers, symbols) of one function, counted before tokenising
MAX_TOKENS = 40_000  # tokens of all their functions
STUDENT_SECONDS = 20.0  # to parse, normalise and fingerprint their files
MASK_CHARS = 1_024  # a function up to this long keeps its k-gram masks (at most 128 KB) between comparisons

_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass
class SharedFunction:
    """One function two students wrote alike."""

    function: str
    similarity: float
    code_a: str
    code_b: str
    lines_a: list[int] = field(default_factory=list)  # lines of code_a (from 1) that hold shared fingerprints
    lines_b: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the function for summary.json."""
        return {
            "function": self.function,
            "similarity": self.similarity,
            "code_a": self.code_a,
            "code_b": self.code_b,
            "lines_a": self.lines_a,
            "lines_b": self.lines_b,
        }


@dataclass
class Pair:
    """Two students whose code is suspiciously alike."""

    a: str
    b: str
    score: float
    overlap: int
    functions: list[SharedFunction] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the pair for summary.json."""
        return {
            "a": self.a,
            "b": self.b,
            "score": self.score,
            "overlap": self.overlap,
            "functions": [f.to_dict() for f in self.functions],
        }


@dataclass
class Similarity:
    """The class's suspicious pairs and how they were found."""

    pairs: list[Pair]
    compared: int
    max_score: float
    settings: dict
    not_compared: dict[str, str] = field(default_factory=dict)  # student -> why they were left out

    def to_dict(self) -> dict:
        """Return the similarity section of summary.json."""
        out = {
            "library": "copydetect",
            "settings": self.settings,
            "compared_pairs": self.compared,
            "max_pair_score": self.max_score,
            "groups": groups(self.pairs),
            "pairs": [p.to_dict() for p in self.pairs],
        }
        if self.not_compared:
            out["not_compared"] = sorted(self.not_compared)
            out["not_compared_reasons"] = {s: self.not_compared[s] for s in sorted(self.not_compared)}
        return out


@dataclass
class Chunk:
    """One function: its code as compared (normalised) and as shown (the student's own lines)."""

    code: str  # what copydetect fingerprints
    shown: str  # the function as written, then any helper inlined into it
    lines: dict[int, tuple[int, ...]] | None = None  # line of code -> lines of shown (from 1); see line_map
    origin: tuple = ()  # (exercise, file text, graded names, name), to map the lines when a pair shows them
    unparsed: bool = True  # code is ast.unparse's output (lexed line by line), not a file's raw text


class Dropped(Exception):  # noqa: N818 - a verdict, not a failure
    """A student left out of the comparison; the message says why."""


def groups(pairs: list[Pair]) -> list[list[str]]:
    """Return the students linked by listed pairs, as groups (a class that shares one source is one group)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for p in pairs:
        a, b = root(p.a), root(p.b)
        parent[max(a, b)] = min(a, b)
    found: dict[str, list[str]] = {}
    for x in sorted(parent):
        found.setdefault(root(x), []).append(x)
    return sorted(found.values(), key=lambda g: (-len(g), g))


# --- normalising ---------------------------------------------------------------------------------------------


def _truth(test: ast.expr) -> bool | None:
    """Return the value of a test that is a constant (`True`, `1`, `not False`), else None."""
    negate = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negate = test.operand, not negate
    if isinstance(test, ast.Constant):
        return bool(test.value) != negate
    return None


def _noop(stmt: ast.stmt) -> bool:
    """Return whether a statement does nothing: `pass`, a docstring, a bare constant."""
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))


def _loop_exits(body: list) -> int:
    """Return the number of break and continue statements of a loop body outside its inner loops and defs."""
    count, todo = 0, list(body)
    nested = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            count += 1
        elif not isinstance(node, nested):
            todo.extend(ast.iter_child_nodes(node))
    return count


def _reraises(handler: ast.ExceptHandler) -> bool:
    """Return whether an except clause only raises again what it caught."""
    body = [s for s in handler.body if not _noop(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].cause is not None:
        return False
    exc = body[0].exc
    return exc is None or (isinstance(exc, ast.Name) and exc.id == handler.name)


def _nullcontext(item: ast.withitem) -> bool:
    """Return whether a with-item is `nullcontext(...)` or `contextlib.nullcontext(...)`."""
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    return (f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")) == "nullcontext"


def _unwrapped(stmt: ast.stmt) -> list | None:
    """Return the statements that a wrapper which always runs its body once stands for; None if stmt is none."""
    if isinstance(stmt, ast.If):
        truth = _truth(stmt.test)
        if truth is not None:
            return stmt.body if truth else stmt.orelse
    elif isinstance(stmt, ast.While):
        body = stmt.body
        if _truth(stmt.test) and not stmt.orelse and isinstance(body[-1], ast.Break) and _loop_exits(body) == 1:
            return body[:-1]
    elif isinstance(stmt, ast.With):
        if all(_nullcontext(i) for i in stmt.items):
            binds = [
                ast.copy_location(ast.Assign([i.optional_vars], (i.context_expr.args or [ast.Constant(None)])[0]), stmt)
                for i in stmt.items
                if i.optional_vars is not None
            ]
            return binds + stmt.body
    elif isinstance(stmt, ast.Try):
        if all(_reraises(h) for h in stmt.handlers) and all(_noop(s) for s in stmt.finalbody):
            return stmt.body + stmt.orelse
    return None


def _flatten(body: list) -> list:
    """Return a block with wrappers undone and no-op statements dropped, at every depth."""
    out = []
    for stmt in body:
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                setattr(stmt, name, _flatten(block) or ([ast.Pass()] if name == "body" else []))
        for part in getattr(stmt, "handlers", []) + getattr(stmt, "cases", []):
            part.body = _flatten(part.body) or [ast.Pass()]
        inner = _unwrapped(stmt)
        if inner is not None:
            out.extend(inner)  # already flattened, as stmt's own blocks
        elif not _noop(stmt):
            out.append(stmt)
    return out


def _own_nodes(stmt: ast.stmt):
    """Yield the nodes of a statement outside the statements nested in it."""
    todo = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _blocks(fn: ast.AST):
    """Yield every statement list inside fn, fn's own body first."""
    todo = [fn]
    while todo:
        node = todo.pop()
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
                todo.extend(block)
        for part in getattr(node, "handlers", []) + getattr(node, "cases", []):
            yield part.body
            todo.extend(part.body)


def _swap(stmt: ast.stmt, old: ast.AST, new: ast.AST) -> None:
    """Put new where old is inside stmt."""
    for node in ast.walk(stmt):
        for name, value in ast.iter_fields(node):
            if value is old:
                setattr(node, name, new)
                return
            if isinstance(value, list):
                for k, v in enumerate(value):
                    if v is old:
                        value[k] = new
                        return


def _inline(graded: frozenset, tree: ast.Module) -> dict[str, list]:
    """Inline each helper named once in the file, in a call from a graded function; return {graded: helpers}."""
    inlined: dict[str, list] = {}
    if not any(isinstance(d, ast.FunctionDef) and d.name not in graded for d in tree.body):
        return inlined
    for _ in range(8):  # a helper calling a helper is inlined one round later
        names = [d.name for d in tree.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
        once = {n for n in names if names.count(n) == 1}
        uses: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in once:
                uses[node.id] = uses.get(node.id, 0) + 1
        helpers = {d.name: d for d in tree.body if getattr(d, "name", None) in once and d.name not in graded}
        helpers = {n: d for n, d in helpers.items() if uses.get(n) == 1 and isinstance(d, ast.FunctionDef)}
        sites = []
        for fn in (d for d in tree.body if getattr(d, "name", None) in graded and getattr(d, "name", None) in once):
            for block in _blocks(fn):
                for stmt in block:
                    for node in _own_nodes(stmt):
                        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
                            sites.append((fn, block, stmt, node))
        if not sites:
            break
        for fn, block, stmt, call in sites:
            helper = helpers[call.func.id]
            body = helper.body
            if isinstance(body[-1], ast.Return):
                prelude, value = body[:-1], body[-1].value or ast.Constant(None)
            else:
                prelude, value = body, ast.Constant(None)
            _swap(stmt, call, value)
            at = next(k for k, s in enumerate(block) if s is stmt)
            block[at : at + 1] = [s for s in prelude if not isinstance(s, ast.Pass)] + [stmt]
            tree.body = [d for d in tree.body if d is not helper]
            inlined.setdefault(fn.name, []).append(helper)  # it leaves the file's functions, shown with fn
    return inlined


def _depth(tree: ast.AST, limit: int, docstrings: bool = False) -> int:
    """Return how deep the tree nests, counting no further than limit + 1.

    docstrings: and, on the way, mark the lines of each function's docstring, which the report does not show.
    """
    node_type, context, functions = ast.AST, ast.expr_context, (ast.FunctionDef, ast.AsyncFunctionDef)
    deepest, todo = 0, [(tree, 0)]
    pop, push = todo.pop, todo.append
    while todo:
        node, d = pop()
        if d > deepest:
            deepest = d
            if d > limit:
                break
        if docstrings and isinstance(node, functions) and ast.get_docstring(node, clean=False) is not None:
            node._grader_doc = range(node.body[0].lineno, node.body[0].end_lineno + 1)
        d += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for v in value:
                    if isinstance(v, node_type):
                        push((v, d))
            elif isinstance(value, node_type) and not isinstance(value, context):
                push((value, d))
    return deepest


def _own_lines(node: ast.stmt) -> range:
    """Return a statement's lines without its nested statements: a compound statement's header line only."""
    if any(isinstance(getattr(node, n, None), list) for n in ("body", "handlers", "cases")):
        return range(node.lineno, node.lineno + 1)
    return range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _shown(lines: list[str], fn: ast.AST) -> list[int]:
    """Return the file lines (from 1) that show a function: decorators to end, without its docstring."""
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    doc = getattr(fn, "_grader_doc", range(0))
    return [i for i in range(first, fn.end_lineno + 1) if i not in doc]


def _chunk(fn: ast.AST, helpers: list, lines: list[str], mapped: bool, code: str | None = None) -> Chunk:
    """Return one normalised function, its helpers inlined, with the student's lines (mapped: line by line).

    code: the function as unparsed already (a chunk's code, when line_map maps its lines).
    """
    shown_at: list[int] = []
    for k, part in enumerate([fn, *helpers]):
        shown_at += ([0] if k else []) + _shown(lines, part)  # 0: the blank line between two defs
    shown = "".join(lines[i - 1] if i else "\n" for i in shown_at)
    code = ast.unparse(fn) + "\n" if code is None else code
    if not mapped:
        return Chunk(code, shown)
    where = {line: k for k, line in enumerate(shown_at, 1) if line}
    mapping: dict[int, tuple[int, ...]] = {}
    again = _statements(code)
    ours = [n for n in ast.walk(fn) if isinstance(n, ast.stmt)]
    if len(again) == len(ours):
        for (kind, own), o in zip(again, ours, strict=True):
            if kind is not type(o) or not hasattr(o, "lineno"):
                continue
            to = tuple(where[i] for i in _own_lines(o) if i in where)
            for line in own:
                mapping[line] = tuple(sorted(set(mapping.get(line, ()) + to)))
    return Chunk(code, shown, mapping)


@functools.lru_cache(maxsize=256)
def _statements(code: str) -> tuple[tuple[type, range], ...]:
    """Return the statements of a function's code as parsed again, in ast.walk's order: type and own lines."""
    try:
        return tuple((type(n), _own_lines(n)) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.stmt))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()


def _whole(text: str) -> Chunk:
    """Return an unparsable file as one chunk, cut to MAX_FUNCTION_CHARS at a line's end."""
    lines, size = [], 0
    for line in parser_lines(text, keepends=True):
        size += len(line)
        if size > MAX_FUNCTION_CHARS:
            break
        lines.append(line)
    shown = "".join(lines) or text[:MAX_FUNCTION_CHARS]
    code = shown.replace("\r\n", "\n").replace("\r", "\n")
    skip = len(code) - len(code.lstrip("\n"))  # Pygments drops leading newlines: count lines from the first code
    code = code[skip:]
    lines = {i: (i + skip,) for i in range(1, len(parser_lines(code, keepends=True)) + 1)}
    return Chunk(code, shown, lines, unparsed=False)


def file_chunks(exercise: str, text: str, graded: frozenset = frozenset(), mapped: bool = False) -> dict[str, Chunk]:
    """Return {'ex1.dC': Chunk} for one file, normalised; unparsable code is one chunk; raise Dropped if hostile."""
    read = _read(exercise, text, graded)
    if isinstance(read, dict):
        return read
    out = {}
    for fn, helpers, lines in read:
        name = f"{exercise}.{fn.name}"
        out[name] = _chunk(fn, helpers, lines, mapped)
        out[name].origin = (exercise, text, graded, name)
    return out


def _read(exercise: str, text: str, graded: frozenset) -> list[tuple] | dict[str, Chunk]:
    """Return a file's top-level functions, normalised, in order, each with the helpers inlined into it and the
    file's lines; or the chunks of an unparsable file; raise Dropped if hostile."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {f"{exercise}.<file>": _whole(text)} if text.strip() else {}
    except (RecursionError, MemoryError):
        raise Dropped(f"{exercise}: code nested too deeply to read") from None
    depth = _depth(tree, MAX_DEPTH, docstrings=True)
    if depth > MAX_DEPTH:
        raise Dropped(f"{exercise}: code nested more than {MAX_DEPTH} levels deep") from None
    tree.body = _flatten(tree.body)
    inlined = _inline(graded, tree)
    lines = [line if line.endswith(("\n", "\r")) else line + "\n" for line in parser_lines(text, keepends=True)]
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [(fn, inlined.get(fn.name, []), lines) for fn in tree.body if isinstance(fn, functions)]


def line_map(chunk: Chunk) -> dict[int, tuple[int, ...]]:
    """Return, per line of a chunk's code, the lines of its shown text it came from (file_chunks' mapped=True)."""
    if chunk.lines is None:
        exercise, text, graded, name = chunk.origin
        fn, helpers, lines = _functions_read(exercise, text, graded)[name]
        chunk.lines = _chunk(fn, helpers, lines, True, chunk.code).lines
    return chunk.lines


@functools.lru_cache(maxsize=32)
def _functions_read(exercise: str, text: str, graded: frozenset) -> dict[str, tuple]:
    """Return _read's functions by name (the last of a name, as file_chunks keeps), for the files a pair shows."""
    return {f"{exercise}.{fn.name}": (fn, helpers, lines) for fn, helpers, lines in _read(exercise, text, graded)}


def functions(exercise: str, text: str) -> dict[str, str]:
    """Return {'ex1.dC': that function as compared}, normalised; unparsable code is one chunk."""
    try:
        return {name: c.code for name, c in file_chunks(exercise, text, _stub()[0].get(exercise, frozenset())).items()}
    except Dropped:
        return {}


def student_chunks(files: dict[str, str], memo: dict | None = None) -> dict[str, Chunk]:
    """Return one student's functions, normalised, within the bounds; raise Dropped naming the one passed."""
    graded = _stub()[0]
    memo = {} if memo is None else memo
    size = sum(len(t) for t in files.values())
    if size > MAX_CHARS:
        raise Dropped(f"its exercise files hold {size:,} characters, more than the {MAX_CHARS:,} the check reads")
    chunks: dict[str, Chunk] = {}
    tokens = memo.setdefault("tokens", {})  # function text -> its tokens, counted once
    for ex, text in sorted(files.items()):
        if (ex, text) not in memo:
            try:
                memo[ex, text] = file_chunks(ex, text, graded.get(ex, frozenset()))
            except Dropped as why:
                memo[ex, text] = Dropped(str(why))  # without its traceback, which holds this frame and memo
        if isinstance(memo[ex, text], Dropped):  # memo: a class hands in many identical files
            raise Dropped(str(memo[ex, text]))
        chunks.update(memo[ex, text])
    if len(chunks) > MAX_FUNCTIONS:
        raise Dropped(f"it has {len(chunks)} functions, more than the {MAX_FUNCTIONS} the check compares")
    total = 0
    for name, chunk in sorted(chunks.items()):
        if len(chunk.code) > MAX_FUNCTION_CHARS:
            raise Dropped(f"{name} has {len(chunk.code):,} characters, more than the {MAX_FUNCTION_CHARS:,} compared")
        count = tokens.get(chunk.code)
        if count is None:
            count = tokens[chunk.code] = len(_TOKEN.findall(chunk.code))
        if count > MAX_FUNCTION_TOKENS:
            raise Dropped(f"{name} has {count:,} tokens, more than the {MAX_FUNCTION_TOKENS:,} compared")
        total += count
    if total > MAX_TOKENS:
        raise Dropped(f"its functions hold {total:,} tokens, more than the {MAX_TOKENS:,} compared per student")
    return chunks


# --- fingerprints --------------------------------------------------------------------------------------------


def _fingerprint(code: str, unparsed: bool = True) -> CodeFingerprint:
    """Return copydetect's fingerprint of one function's code: every k-gram of K characters (window 1).

    unparsed: code is ast.unparse's output, lexed line by line; else a file's raw text, lexed whole.
    """
    return CodeFingerprint("submission.py", K, 1, fp=io.StringIO(code), language=UNPARSED if unparsed else "python")


def _drop(fp: CodeFingerprint, hashes: set) -> None:
    """Remove fingerprints (stub, base or common) from a CodeFingerprint, as copydetect's boilerplate does."""
    gone = fp.hashes & hashes
    if not gone:
        return
    fp.hashes = fp.hashes - gone
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in gone}
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code)) if fp.hash_idx else 0
    fp.__dict__.pop("_grader_masks", None)


@functools.lru_cache(maxsize=1)
def _stub() -> tuple[dict[str, frozenset], dict[str, set]]:
    """Return the stub's function names per exercise, and each stub function's fingerprints."""
    from grader.submissions.intake.files import decode_source

    names, hashes = {}, {}
    for path in sorted(STUBS.glob("ex*.py")):
        try:
            text = decode_source(path.read_bytes())
            tree = ast.parse(text)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        names[path.stem] = frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        for name, chunk in file_chunks(path.stem, text).items():
            hashes[name] = set(_fingerprint(chunk.code, chunk.unparsed).hashes)
    return names, hashes


def base_texts(paths) -> list[str]:
    """Return the code of the course's base files: a .py file's text; a notebook's code cells and its functions."""
    from grader.submissions.intake.files import decode_source
    from grader.submissions.notebook import notebook_sources
    from grader.submissions.notebook.cells import python_of, read_notebook

    texts = []
    for path in map(Path, paths):
        if path.suffix == ".ipynb":
            texts += [c.code for c in read_notebook(path) if c.code.strip()]
            sources, _ = notebook_sources(path)
            texts += [sources[ex].text for ex in sorted(sources)]
        else:
            texts.append(python_of(decode_source(path.read_bytes()))[0])
    return texts


def base_hashes(texts: list[str]) -> set:
    """Return every fingerprint of the base code: of each function, normalised, and of the whole text."""
    found: set = set()
    for text in texts:
        try:
            tree = ast.parse(text)
            tree.body = _flatten(tree.body)
            whole = ast.unparse(tree)
            unparsed = True
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            whole, unparsed = text, False
        found |= set(_fingerprint(whole, unparsed).hashes)
        try:
            chunks = file_chunks("base", text)
        except Dropped:
            continue
        for chunk in chunks.values():
            found |= set(_fingerprint(chunk.code, chunk.unparsed).hashes)
    return found


def _student(files: dict[str, str], stub: dict, base: set, by_text: dict, memo: dict) -> tuple[dict, dict]:
    """Return one student's chunks and fingerprints (new texts added to by_text); raise Dropped past a bound."""
    fresh: dict = {}
    try:
        with deadline.overall(STUDENT_SECONDS):
            chunks = student_chunks(files, memo)
            for name, chunk in chunks.items():
                key = (name, chunk.code)
                if key not in by_text and key not in fresh:
                    fp = fresh[key] = _fingerprint(chunk.code, chunk.unparsed)
                    _drop(fp, stub.get(name, set()))
                    _drop(fp, base)
    except deadline.GradingTooLong:
        raise Dropped(f"reading its code took longer than {STUDENT_SECONDS:g} s") from None
    except MemoryError:
        raise Dropped("its code took too much memory to compare") from None
    except RecursionError:
        raise Dropped("its code is nested too deeply to compare") from None
    by_text.update(fresh)
    return chunks, {name: by_text[(name, chunk.code)] for name, chunk in chunks.items()}


def fingerprint_class(sources: dict[str, dict[str, str]], base=()) -> tuple[dict, dict, dict]:
    """Return each student's chunks and fingerprints (stub, base and common ones removed), and who was left out."""
    stub = _stub()[1]
    base_set = base_hashes(base_texts(base)) if base else set()
    by_text: dict[tuple[str, str], CodeFingerprint] = {}  # many students write the same text: fingerprint it once
    chunks, prints, dropped, memo = {}, {}, {}, {}
    for s in sorted(sources):
        try:
            chunks[s], prints[s] = _student(sources[s], stub, base_set, by_text, memo)
        except Dropped as why:
            dropped[s] = str(why)
    holders: dict[tuple[str, int], int] = {}  # (function, its text's fingerprint) -> how many students wrote it
    for s in prints:
        for name, fp in prints[s].items():
            holders[name, id(fp)] = holders.get((name, id(fp)), 0) + 1
    frequency: dict[str, dict[int, int]] = {}  # function -> fingerprint -> how many students have it
    for (name, _), fp in by_text.items():
        counts, times = frequency.setdefault(name, {}), holders[name, id(fp)]
        for h in fp.hashes:
            counts[h] = counts.get(h, 0) + times
    common_at = max(COMMON_MIN, math.ceil(COMMON_SHARE * len(prints)))
    common = {name: {h for h, c in counts.items() if c >= common_at} for name, counts in frequency.items()}
    for (name, _), fp in by_text.items():
        _drop(fp, common[name])
    return chunks, prints, dropped


def compare_class(sources: dict[str, dict[str, str]], base=()) -> Similarity:
    """Compare every pair of students function by function; return the pairs at or above THRESHOLD.

    base: the course's base files (.py or .ipynb, course.toml's [similarity] base), whose code is never evidence.
    """
    # Python's cyclic garbage collector is off meanwhile: the parse trees, tokens and fingerprints made and dropped
    # here hold no cycles, yet set it off every 700 objects to walk what is alive (a third of the time, and in
    # grade batch's child, the scheduler's objects too, page by page)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _compare_class(sources, base)
    finally:
        if collecting:
            gc.enable()


def _compare_class(sources: dict[str, dict[str, str]], base) -> Similarity:
    chunks, prints, dropped = fingerprint_class(sources, base)
    students = sorted(prints)
    memo: dict = {}  # compare each pair of distinct texts once

    def compare(x, y):
        key = (id(x), id(y))
        if key not in memo:
            memo[key] = overlap(x, y)
        return memo[key]

    shared, covered = _totals(students, prints)
    n = len(students)
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    ratio = np.divide(shared, covered, out=np.zeros((n, n)), where=covered > 0)
    top = 0.0
    if n > 1:  # round() is monotonic: the largest rounded score is the largest score, rounded as _compare does
        i, j = np.unravel_index(np.argmax(np.where(upper, ratio, -1.0)), ratio.shape)
        top = max(top, round(float(shared[i, j]) / float(covered[i, j]), 4) if covered[i, j] else 0.0)
    # only pairs that could reach the threshold after rounding are compared again, function by function
    maybe = upper & (ratio >= THRESHOLD - 1e-4) & (shared >= MIN_OVERLAP)
    pairs = []
    for i, j in zip(*np.nonzero(maybe), strict=True):
        a, b = students[i], students[j]
        pair = _compare(a, b, prints[a], prints[b], chunks, compare)
        if pair.score >= THRESHOLD and pair.overlap >= MIN_OVERLAP:
            pairs.append(pair)
    compared = n * (n - 1) // 2
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    settings = {
        "k": K,
        "window": 1,
        "common_share": COMMON_SHARE,
        "common_min": COMMON_MIN,
        "threshold": THRESHOLD,
        "min_overlap": MIN_OVERLAP,
        "min_function": MIN_FUNCTION,
        "base": [Path(p).name for p in base],
    }
    return Similarity(pairs, compared, round(top, 4), settings, dropped)


def _counts(x: CodeFingerprint, y: CodeFingerprint) -> bool:
    """Return whether two versions of a function count in a score: both fingerprinted, one at least MIN_FUNCTION."""
    return bool(x.token_coverage and y.token_coverage) and max(x.token_coverage, y.token_coverage) >= MIN_FUNCTION


def _comparable(low, high):
    """Return a function's comparable characters from its two versions' coverages (numbers or arrays)."""
    # the smaller, as copydetect counts; the larger where only one version reaches MIN_FUNCTION (a one-liner
    # inside a long function is not that function copied); none where neither does
    return np.where(low >= MIN_FUNCTION, low, np.where(high >= MIN_FUNCTION, high, 0))


def _totals(students: list[str], prints: dict) -> tuple[np.ndarray, np.ndarray]:
    """Return two (n, n) matrices: [a, b] = the characters a shares with b, and their comparable characters.

    Both are _compare's sums over the functions the two students wrote, for a < b (the rest of each matrix is not
    read). Per function, the class writes a few distinct texts: each text is compared with every other once
    (_shares), and the students' pairs gather their texts' numbers. The comparable characters of one function
    come from its two coverages (_comparable).
    """
    n = len(students)
    shared = np.zeros((n, n), dtype=np.int64)
    covered = np.zeros((n, n), dtype=np.int64)
    for name in sorted({name for s in students for name in prints[s]}):
        texts: list[CodeFingerprint] = []  # the distinct versions, fingerprinted
        index: dict[int, int] = {}
        which = []  # per student, the version they wrote (none: -1, the row and column of zeros below)
        for s in students:
            fp = prints[s].get(name)
            if fp is None or not fp.token_coverage:
                which.append(-1)
                continue
            if id(fp) not in index:
                index[id(fp)] = len(texts)
                texts.append(fp)
            which.append(index[id(fp)])
        if not texts:
            continue
        d = len(texts)
        coverage = np.array([int(fp.token_coverage) for fp in texts], dtype=np.int64)
        low, high = np.minimum.outer(coverage, coverage), np.maximum.outer(coverage, coverage)
        pick = np.array(which, dtype=np.int64)
        both = np.zeros((d + 1, d + 1), dtype=np.int64)
        both[:d, :d] = _comparable(low, high)
        covered += both.take(pick, 0).take(pick, 1)
        # _counts: both fingerprinted (all of these are), one at least MIN_FUNCTION
        both[:d, :d] = np.where(high >= MIN_FUNCTION, np.minimum(_shares(texts), low), 0)
        shared += both.take(pick, 0).take(pick, 1)
    return shared, covered


def _shares(texts: list[CodeFingerprint]) -> np.ndarray:
    """Return a (d, d) matrix: [u, v] = overlap(texts[u], texts[v])[0], the characters of u that v's share.

    overlap counts the union of the spans [s, s + k) of u's k-grams whose fingerprint v also has. Here an index of
    which texts hold each fingerprint lists, for each k-gram start of u, the texts that share it; sorted by text,
    each text's starts give the union's size as overlap's long-function path does: k, plus the gap to the next
    start, at most k, for every start but the last.
    """
    d = len(texts)
    ids: dict = {}  # fingerprint -> its number among this function's
    holders: list[list[int]] = []  # fingerprint number -> the texts that have it
    starts, hashes = [], []  # per text: where its k-grams start, in order, and their fingerprints' numbers
    for u, fp in enumerate(texts):
        where, which = [], []
        for h, at in fp.hash_idx.items():
            k = ids.get(h)
            if k is None:
                k = ids[h] = len(holders)
                holders.append([])
            holders[k].append(u)
            where += at
            which += [k] * len(at)
        order = np.argsort(np.array(where, dtype=np.int64))
        starts.append(np.array(where, dtype=np.int64)[order])
        hashes.append(np.array(which, dtype=np.int64)[order])
    sizes = np.array([len(h) for h in holders], dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(sizes)))
    flat = np.array([u for h in holders for u in h], dtype=np.int16 if d < 2**15 else np.int64)
    out = np.zeros((d, d), dtype=np.int64)
    for u, fp in enumerate(texts):
        if not len(starts[u]):
            continue
        k = fp.k
        count = sizes[hashes[u]]  # per start of u: how many texts share its k-gram (u among them)
        row = np.repeat(first[hashes[u]] - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
        other = flat[row]  # the texts sharing each start, start by start
        by_text = np.argsort(other, kind="stable")  # by text, then start (a radix sort, for 16 bits)
        other, at = other[by_text].astype(np.int64), np.repeat(starts[u], count)[by_text]
        same = other[1:] == other[:-1]
        gaps = np.where(same, np.minimum(np.diff(at), k), 0)
        out[u] = np.bincount(other[1:], weights=gaps, minlength=d).astype(np.int64)
        out[u] += k * np.bincount(other, minlength=d).clip(max=1)
    return out


def _masks(fp: CodeFingerprint) -> dict[int, int]:
    """Return, per fingerprint hash, the characters its k-grams cover in fp's filtered code, as bits of an int."""
    masks = fp.__dict__.get("_grader_masks")
    if masks is None:
        run = (1 << fp.k) - 1
        masks = {}
        for h, where in fp.hash_idx.items():
            bits = 0
            for i in where:
                bits |= run << int(i)
            masks[h] = bits
        fp._grader_masks = masks
    return masks


def _starts(fp: CodeFingerprint, shared: set) -> np.ndarray:
    """Return where the k-grams of the shared fingerprints start in fp's filtered code, sorted, once each."""
    where = itertools.chain.from_iterable(fp.hash_idx[h] for h in shared if h in fp.hash_idx)
    return np.unique(np.fromiter(where, dtype=np.int64))


def _covered(fp: CodeFingerprint, shared: set) -> int:
    """Return how many characters of fp's filtered code the k-grams of the shared fingerprints cover."""
    if len(fp.filtered_code) <= MASK_CHARS:
        masks = _masks(fp)
        return functools.reduce(operator.or_, (masks[h] for h in shared)).bit_count()
    starts = _starts(fp, shared)  # the union of the spans [s, s + k): each reaches the next start, or k
    return int(np.minimum(np.diff(starts), fp.k).sum()) + fp.k if len(starts) else 0


def overlap(x: CodeFingerprint, y: CodeFingerprint) -> tuple:
    """Return copydetect's compare_files(x, y)[:2]: overlapping characters of x, and each side's share of them.

    compare_files merges the k-grams both share into slices and sums their lengths, with numpy calls on small
    arrays, ~180 us a pair. The same number is the size of the union of the shared k-grams' spans, counted here
    as the set bits of one OR: ~10 us (a long function: from the sorted starts). tests/test_similarity.py pins
    the equality over a class's pairs.
    """
    shared = x.hashes & y.hashes
    if not shared:
        return 0, (0, 0)
    tokens_x, tokens_y = _covered(x, shared), _covered(y, shared)
    share_x = tokens_x / x.token_coverage if x.token_coverage else 0
    share_y = tokens_y / y.token_coverage if y.token_coverage else 0
    return tokens_x, (share_x, share_y)


def shared_lines(fp: CodeFingerprint, shared: set, chunk: Chunk) -> list[int]:
    """Return the lines of chunk.shown (from 1) that hold the shared fingerprints."""
    starts = _starts(fp, shared)
    if not len(starts):
        return []
    spans = get_copied_slices(starts, fp.k)  # the union of the shared k-grams' spans, in the filtered code
    if len(fp.offsets) > 0:  # filtered code to the code, as copydetect's compare_files does
        at = np.clip(np.searchsorted(fp.offsets[:, 0], spans), 0, fp.offsets.shape[0] - 1)
        spans = spans + fp.offsets[:, 1][at]
    begins = [0, *itertools.accumulate(len(line) for line in parser_lines(chunk.code, keepends=True))][:-1]
    mapping = line_map(chunk)
    lines: set[int] = set()
    for a, b in zip(spans[0].tolist(), spans[1].tolist(), strict=True):
        first = bisect.bisect_right(begins, a)
        last = bisect.bisect_right(begins, max(a, b - 1))
        for line in range(first, last + 1):
            lines.update(mapping.get(line, ()))
    return sorted(lines)


def _compare(a: str, b: str, fa: dict, fb: dict, chunks: dict, compare=overlap) -> Pair:
    overlap, coverage, shown = 0, 0, []
    for name in sorted(set(fa) & set(fb)):
        x, y = fa[name], fb[name]
        if not _counts(x, y):
            continue
        max_coverage = max(x.token_coverage, y.token_coverage)
        coverage += int(_comparable(min(x.token_coverage, y.token_coverage), max_coverage))
        common = x.hashes & y.hashes
        if not common:
            continue
        tokens, (sim_a, sim_b) = compare(x, y)[:2]
        tokens = int(min(int(tokens), x.token_coverage, y.token_coverage))
        overlap += tokens
        sim = max(sim_a, sim_b) if min(x.token_coverage, y.token_coverage) >= MIN_FUNCTION else tokens / max_coverage
        sim = round(float(min(1.0, sim)), 4)
        if sim >= SHOWN_FUNCTION:
            ca, cb = chunks[a][name], chunks[b][name]
            lines_a, lines_b = shared_lines(x, common, ca), shared_lines(y, common, cb)
            shown.append(SharedFunction(name, sim, ca.shown, cb.shown, lines_a, lines_b))
    score = round(float(overlap) / float(coverage), 4) if coverage else 0.0
    shown.sort(key=lambda f: (-f.similarity, f.function))
    return Pair(a, b, score, overlap, shown)
