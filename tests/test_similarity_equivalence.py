"""Similarity: the class-wide shortcuts give what the plain steps give (issue #22).

_shares gives overlap's numbers for every pair of a function's texts, compare_class leaves the garbage collector
as it found it, a file's Dropped verdict is kept without its traceback, and normalised code lexed line by line
gives the whole text's tokens and fingerprints. tests/test_similarity.py pins the rest
(overlap is compare_files, the class totals are every pair's own score).
"""

from __future__ import annotations

import gc

import pytest
from pygments.lexers.python import PythonLexer

from grader.classroom.reports import similarity
from tests.conftest import ROOT
from tests.independent import copied_and_renamed, student_files


def test_shares_are_overlaps():
    sources = {f"s{k}": {ex.removesuffix(".py"): t for ex, t in student_files(k).items()} for k in range(8)}
    sources["copy"] = {ex.removesuffix(".py"): t for ex, t in copied_and_renamed(student_files(2)).items()}
    _, prints, _ = similarity.fingerprint_class(sources)
    checked = 0
    for name in sorted({n for p in prints.values() for n in p}):
        texts = list({id(p[name]): p[name] for p in prints.values() if name in p and p[name].token_coverage}.values())
        if texts:
            got = similarity._shares(texts)
            want = [[int(similarity.overlap(x, y)[0]) for y in texts] for x in texts]
            assert got.tolist() == want, name
            checked += len(texts) ** 2
    assert checked > 200


def test_compare_class_leaves_the_garbage_collector_as_it_found_it():
    sources = {f"s{k}": {ex.removesuffix(".py"): t for ex, t in student_files(k).items()} for k in range(3)}
    assert gc.isenabled()
    similarity.compare_class(sources)
    assert gc.isenabled()
    gc.disable()
    try:
        similarity.compare_class(sources)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_kept_verdict_holds_no_traceback():
    deep = {"ex2": "def dlogits(logits):\n    return " + "-" * 300 + "logits\n"}
    memo: dict = {}
    for _ in range(2):  # read, then from the memo
        with pytest.raises(similarity.Dropped, match="nested more than"):
            similarity.student_chunks(deep, memo)
    assert memo["ex2", deep["ex2"]].__traceback__ is None


def _every_function():
    """Yield each normalised function of every file the tests and the course hold, and of 20 independent students."""
    files = [p for d in ("tests", "reference", "exercises") for p in sorted((ROOT / d).rglob("*.py"))]
    texts = [(p.stem if p.stem in ("ex1", "ex2", "ex3", "ex4") else "ex1", p.read_text("utf-8")) for p in files]
    texts += [(ex.removesuffix(".py"), t) for k in range(20) for ex, t in student_files(k).items()]
    for ex, text in texts:
        try:
            chunks = similarity.file_chunks(ex, text)
        except similarity.Dropped:
            continue
        for chunk in chunks.values():
            if chunk.unparsed:
                yield chunk.code


TRICKY = [
    "def f(x):\n\n    def g(y):\n        return y\n\n    class C:\n        z = 1\n    return g(x)\n",
    "@dec(1)\nasync def f(a, /, b=2, *c, d, **e) -> int:\n    from torch import nn as n, zeros\n    import a.b as c\n",
    "def f(x):\n    match x:\n        case [1, *_]:\n            pass\n"
    "        case {'k': _}:\n            return f'{x!r:>{w}}'\n",
    "def f():\n    return ('it\\'s', \"a\\\"b\", b'\\x00', r'\\d', f\"{'q'}\", '\\r\\x1c\\u2028')\n",
    'def f():\n    """a docstring\n    on two lines"""\n    return 1\n',  # lexed whole: the lexer's fallback
    "\n\ndef f():\n    return 1\n\n\n",  # newlines at both ends, trimmed as Pygments trims them
    "def f():\n    x = 1 + \\\n        2\n",  # a joined line: lexed whole
    "",
]


def test_normalised_code_lexed_line_by_line_gives_the_whole_texts_tokens():
    whole, linewise = PythonLexer(), similarity._LinewisePython()
    codes = [*TRICKY, *_every_function()]
    assert len(codes) > 1500
    for code in codes:
        assert list(linewise.get_tokens(code)) == list(whole.get_tokens(code)), code
    assert 0 < linewise.kept <= similarity.MEMO_TOKENS


def test_normalised_code_lexed_line_by_line_gives_the_same_fingerprints():
    for code in [*TRICKY, *list(_every_function())[::7]]:
        a, b = similarity._fingerprint(code), similarity._fingerprint(code, unparsed=False)
        assert a.filtered_code == b.filtered_code, code
        assert a.offsets.tolist() == b.offsets.tolist(), code
        assert a.hash_idx == b.hash_idx, code
        assert a.token_coverage == b.token_coverage, code


def test_the_line_by_line_lexer_keeps_a_bounded_memo(monkeypatch):
    monkeypatch.setattr(similarity, "MEMO_TOKENS", 40)
    lexer = similarity._LinewisePython()
    code = "def f():\n" + "".join(f"    x{k} = y{k} + {k}\n" for k in range(50)) + "    return " + "z" * 500 + "\n"
    assert list(lexer.get_tokens(code)) == list(PythonLexer().get_tokens(code))
    assert lexer.kept <= 40
    assert 0 < len(lexer.lines) < 50
    assert all(len(line) <= similarity.MEMO_LINE for line in lexer.lines)
