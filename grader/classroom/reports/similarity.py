"""Similarity between submissions, function by function, with copydetect (MOSS-style k-gram fingerprints).

Each exercise file is cut into its top-level functions (docstrings dropped). copydetect tokenises each one with
Pygments and replaces every name with one symbol, so renaming variables changes nothing; whitespace and
comments are ignored. Fingerprints of the released stub, and fingerprints that half the class shares (the one
obvious way to write `dlogits @ W2.T`), are removed before comparing: what a pair shares and most others do not
is what counts. A pair's score is the share of its fingerprinted code that overlaps, over the functions both wrote.
Every k-gram is kept (window 1), so the result does not depend on Python's per-process string hashing.
"""

from __future__ import annotations

import ast
import functools
import io
import math
import operator
import sys
import types
from dataclasses import dataclass, field

import numpy as np

from grader.submissions.intake.read import STUBS


def _import_copydetect():
    """Import copydetect without the matplotlib it loads for HTML reports the grader never makes (~0.3 s)."""
    stubs = [name for name in ("matplotlib", "matplotlib.pyplot") if name not in sys.modules]
    for name in stubs:
        sys.modules[name] = types.ModuleType(name)
    if stubs:
        sys.modules["matplotlib"].pyplot = sys.modules["matplotlib.pyplot"]
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

K = 25  # characters of filtered code per fingerprint (copydetect's default noise threshold)
COMMON_SHARE = 0.5  # a fingerprint that at least half the class has is not evidence...
COMMON_MIN = 5  # ... if at least this many students have it (so a small class keeps its fingerprints)
THRESHOLD = 0.85  # a pair whose score reaches this is listed
MIN_OVERLAP = 200  # ... if it shares at least this many characters of filtered code
SHOWN_FUNCTION = 0.5  # functions this similar are shown side by side in the report


@dataclass
class SharedFunction:
    """One function two students wrote alike."""

    function: str
    similarity: float
    code_a: str
    code_b: str

    def to_dict(self) -> dict:
        """Return the function for summary.json."""
        return {"function": self.function, "similarity": self.similarity, "code_a": self.code_a, "code_b": self.code_b}


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

    def to_dict(self) -> dict:
        """Return the similarity section of summary.json."""
        return {
            "library": "copydetect",
            "settings": self.settings,
            "compared_pairs": self.compared,
            "max_pair_score": self.max_score,
            "groups": groups(self.pairs),
            "pairs": [p.to_dict() for p in self.pairs],
        }


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


def functions(exercise: str, text: str) -> dict[str, str]:
    """Return {'ex1.dC': source of that function without its docstring}; unparsable code is one chunk."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a 20,000-deep expression is a student's too
        return {f"{exercise}.<file>": text[:200_000]} if text.strip() else {}
    lines = text.splitlines(keepends=True)
    out = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        drop = set()
        doc = node.body[0] if node.body else None
        if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
            drop = set(range(doc.lineno - 1, doc.end_lineno))
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        out[f"{exercise}.{node.name}"] = "".join(
            line for i, line in enumerate(lines[first : node.end_lineno], first) if i not in drop
        )
    return out


def _fingerprint(code: str) -> CodeFingerprint:
    return CodeFingerprint("submission.py", K, 1, fp=io.StringIO(code), language="python")


def _drop(fp: CodeFingerprint, hashes: set) -> None:
    """Remove fingerprints (stub or common) from a CodeFingerprint, as copydetect's boilerplate does."""
    gone = fp.hashes & hashes
    if not gone:
        return
    fp.hashes = fp.hashes - gone
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in gone}
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code)) if fp.hash_idx else 0


def _stub_hashes() -> dict[str, set]:
    from grader.submissions.intake.files import decode_source

    stub = {}
    for path in sorted(STUBS.glob("ex*.py")):
        try:
            text = decode_source(path.read_bytes())
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for name, code in functions(path.stem, text).items():
            stub[name] = set(_fingerprint(code).hashes)
    return stub


def fingerprint_class(sources: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """Return each student's functions' code and their fingerprints, without the stub's and the common ones."""
    students = sorted(sources)
    chunks = {s: {} for s in students}
    for s in students:
        for ex, text in sorted(sources[s].items()):
            chunks[s].update(functions(ex, text))
    stub = _stub_hashes()
    by_text: dict[tuple[str, str], CodeFingerprint] = {}  # many students write the same text: fingerprint it once
    frequency: dict[str, dict[int, int]] = {}
    for s in students:
        for name, code in chunks[s].items():
            fp = by_text.get((name, code))
            if fp is None:
                fp = by_text[(name, code)] = _fingerprint(code)
                _drop(fp, stub.get(name, set()))
            counts = frequency.setdefault(name, {})
            for h in fp.hashes:
                counts[h] = counts.get(h, 0) + 1
    common_at = max(COMMON_MIN, math.ceil(COMMON_SHARE * len(students)))
    for (name, _), fp in by_text.items():
        _drop(fp, {h for h, c in frequency[name].items() if c >= common_at})
    prints = {s: {name: by_text[(name, code)] for name, code in chunks[s].items()} for s in students}
    return chunks, prints


def compare_class(sources: dict[str, dict[str, str]]) -> Similarity:
    """Compare every pair of students function by function; return the pairs at or above THRESHOLD."""
    students = sorted(sources)
    chunks, prints = fingerprint_class(sources)
    memo: dict = {}  # and compare each pair of distinct texts once

    def compare(x, y):
        key = (id(x), id(y))
        if key not in memo:
            memo[key] = overlap(x, y)
        return memo[key]

    shared, covered = _totals(students, prints, compare)
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
    }
    return Similarity(pairs, compared, round(top, 4), settings)


def _totals(students: list[str], prints: dict, compare) -> tuple[np.ndarray, np.ndarray]:
    """Return two (n, n) matrices: [a, b] = the characters a shares with b, and their comparable characters.

    Both are _compare's sums over the functions the two students wrote, for a < b. The comparable characters of
    one function are the smaller of its two coverages. Only functions that share a fingerprint overlap, and an
    index of which students hold each fingerprint finds those without comparing the other ~80% of pairs.
    """
    n = len(students)
    shared = np.zeros((n, n), dtype=np.int64)
    covered = np.zeros((n, n), dtype=np.int64)
    for name in sorted({name for s in students for name in prints[s]}):
        have = [(i, prints[s][name]) for i, s in enumerate(students) if name in prints[s]]
        have = [(i, fp) for i, fp in have if fp.token_coverage]
        coverage = np.zeros(n, dtype=np.int64)
        holders: dict[int, int] = {}  # fingerprint -> the students holding it, as bits of an int
        for i, fp in have:
            coverage[i] = int(fp.token_coverage)
            for h in fp.hashes:
                holders[h] = holders.get(h, 0) | 1 << i
        covered += np.minimum.outer(coverage, coverage)
        sharers: dict[int, int] = {}  # many students write the same text: look its fingerprints up once
        for i, x in have:
            if id(x) not in sharers:
                sharers[id(x)] = functools.reduce(operator.or_, (holders[h] for h in x.hashes), 0)
            later = sharers[id(x)] >> (i + 1)
            while later:
                low = later & -later
                j = i + low.bit_length()
                later ^= low
                y = prints[students[j]][name]
                tokens = compare(x, y)[0]
                shared[i, j] += int(min(int(tokens), x.token_coverage, y.token_coverage))
    return shared, covered


def _masks(fp: CodeFingerprint) -> dict[int, int]:
    """Return, per fingerprint hash, the characters its k-grams cover in fp's filtered code, as bits of an int."""
    masks = getattr(fp, "_grader_masks", None)
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


def overlap(x: CodeFingerprint, y: CodeFingerprint) -> tuple:
    """Return copydetect's compare_files(x, y)[:2]: overlapping characters of x, and each side's share of them.

    compare_files merges the k-grams both share into slices and sums their lengths, with numpy calls on small
    arrays, ~180 us a pair. The same number is the size of the union of the shared k-grams' spans, counted here
    as the set bits of one OR: ~10 us. tests/test_similarity.py pins the equality over a class's pairs.
    """
    shared = x.hashes & y.hashes
    if not shared:
        return 0, (0, 0)
    mx, my = _masks(x), _masks(y)
    tokens_x = functools.reduce(operator.or_, (mx[h] for h in shared)).bit_count()
    tokens_y = functools.reduce(operator.or_, (my[h] for h in shared)).bit_count()
    share_x = tokens_x / x.token_coverage if x.token_coverage else 0
    share_y = tokens_y / y.token_coverage if y.token_coverage else 0
    return tokens_x, (share_x, share_y)


def _compare(a: str, b: str, fa: dict, fb: dict, chunks: dict, compare=overlap) -> Pair:
    overlap, coverage, shown = 0, 0, []
    for name in sorted(set(fa) & set(fb)):
        x, y = fa[name], fb[name]
        if not x.token_coverage or not y.token_coverage:
            continue
        coverage += int(min(x.token_coverage, y.token_coverage))
        if not x.hashes & y.hashes:
            continue
        tokens, (sim_a, sim_b) = compare(x, y)[:2]
        tokens = int(min(int(tokens), x.token_coverage, y.token_coverage))
        overlap += tokens
        sim = round(float(min(1.0, max(sim_a, sim_b))), 4)
        if sim >= SHOWN_FUNCTION:
            shown.append(SharedFunction(name, sim, chunks[a][name], chunks[b][name]))
    score = round(float(overlap) / float(coverage), 4) if coverage else 0.0
    shown.sort(key=lambda f: (-f.similarity, f.function))
    return Pair(a, b, score, overlap, shown)
