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
import io
import math
from dataclasses import dataclass, field

from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage

from grader.intake.read import STUBS

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
    from grader.intake.files import decode_source

    stub = {}
    for path in sorted(STUBS.glob("ex*.py")):
        try:
            text = decode_source(path.read_bytes())
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for name, code in functions(path.stem, text).items():
            stub[name] = set(_fingerprint(code).hashes)
    return stub


def compare_class(sources: dict[str, dict[str, str]]) -> Similarity:
    """Compare every pair of students function by function; return the pairs at or above THRESHOLD."""
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
    memo: dict = {}  # and compare each pair of distinct texts once

    def compare(x, y):
        key = (id(x), id(y))
        if key not in memo:
            memo[key] = compare_files(x, y)
        return memo[key]

    pairs, compared, top = [], 0, 0.0
    for i, a in enumerate(students):
        for b in students[i + 1 :]:
            compared += 1
            pair = _compare(a, b, prints[a], prints[b], chunks, compare)
            top = max(top, pair.score)
            if pair.score >= THRESHOLD and pair.overlap >= MIN_OVERLAP:
                pairs.append(pair)
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


def _compare(a: str, b: str, fa: dict, fb: dict, chunks: dict, compare=compare_files) -> Pair:
    overlap, coverage, shown = 0, 0, []
    for name in sorted(set(fa) & set(fb)):
        x, y = fa[name], fb[name]
        if not x.token_coverage or not y.token_coverage:
            continue
        coverage += int(min(x.token_coverage, y.token_coverage))
        if not x.hashes & y.hashes:
            continue
        tokens, (sim_a, sim_b), _ = compare(x, y)
        tokens = int(min(int(tokens), x.token_coverage, y.token_coverage))
        overlap += tokens
        sim = round(float(min(1.0, max(sim_a, sim_b))), 4)
        if sim >= SHOWN_FUNCTION:
            shown.append(SharedFunction(name, sim, chunks[a][name], chunks[b][name]))
    score = round(float(overlap) / float(coverage), 4) if coverage else 0.0
    shown.sort(key=lambda f: (-f.similarity, f.function))
    return Pair(a, b, score, overlap, shown)
