"""The names corpus: the lecture's vocabulary, the default word list and `--data PATH`."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

VOCAB = "." + "abcdefghijklmnopqrstuvwxyz"  # index 0 is the start/end token '.'
STOI = {ch: i for i, ch in enumerate(VOCAB)}
ITOS = dict(enumerate(VOCAB))

# The `names` package on PyPI ships the 1990 US census first-name lists.
_DEFAULT_FILES = ("dist.female.first", "dist.male.first")
_FIRST_FIELD = re.compile(r"^[^\S\n]*([A-Za-z]+)(?=[^\S\n]|$)", re.M)  # a census line's name, if it is letters only


MIN_WORDS = 100  # names a --data file must hold
DEFAULT_SOURCE = "names (PyPI package): US census first names"
LECTURE_DIGEST = "0a30b5557f192f32"  # Corpus.digest of the lecture's names.txt (32,033 names)


class CorpusError(ValueError):
    """A word list that cannot be used as a names corpus."""


@dataclass(frozen=True)
class Corpus:
    """A list of lower-case a-z words and where it came from."""

    words: tuple[str, ...]
    source: str

    @cached_property
    def digest(self) -> str:
        """Return a short checksum of the word list (computed once: every fixture built names it)."""
        return hashlib.sha256("\n".join(self.words).encode()).hexdigest()[:16]

    @property
    def is_default(self) -> bool:
        """Whether this is the built-in corpus (no --data): the census names of the `names` package."""
        return self.source == DEFAULT_SOURCE

    @property
    def is_lecture(self) -> bool:
        """Whether this is the lecture's names.txt, word for word."""
        return self.digest == LECTURE_DIGEST

    def describe(self) -> str:
        """Say which corpus this is in a few words, for the line `grade ex4 --full` prints."""
        if self.is_default:
            return f"the default corpus, {len(self.words):,} US census first names from the `names` package"
        if self.is_lecture:
            return f"the lecture's names.txt ({len(self.words):,} names, from --data {self.source})"
        return f"--data {self.source} ({len(self.words):,} names)"

    def split(self, seed: int = 42) -> tuple[list[str], list[str], list[str]]:
        """Shuffle the words the lecture's way and cut them 80/10/10."""
        return tuple(list(part) for part in _split(self, seed))


@lru_cache(maxsize=8)
def _split(corpus: Corpus, seed: int) -> tuple[tuple[str, ...], ...]:
    """Return the 80/10/10 split, shuffled once per corpus and seed."""
    words = list(corpus.words)
    random.Random(seed).shuffle(words)
    n1, n2 = int(0.8 * len(words)), int(0.9 * len(words))
    return tuple(words[:n1]), tuple(words[n1:n2]), tuple(words[n2:])


def _clean(raw_words, source: str) -> Corpus:
    words = []
    for lineno, raw in enumerate(raw_words, 1):
        word = raw.strip().lower()
        if not word:
            continue
        bad = sorted({ch for ch in word if ch not in STOI or ch == "."})
        if bad:
            raise CorpusError(f"{source}, line {lineno}: {word!r} has characters outside a-z: {''.join(bad)!r}")
        words.append(word)
    if not words:
        raise CorpusError(f"{source}: no words found (expected one name per line, like the lecture's names.txt)")
    if len(words) < MIN_WORDS:  # the 80/10/10 split and the batches need enough of them
        raise CorpusError(f"{source}: {len(words)} names; at least {MIN_WORDS} are needed (names.txt has 32,033)")
    return Corpus(tuple(words), source)


@lru_cache(maxsize=4)
def load(path: str | None = None) -> Corpus:
    """Load the corpus at PATH (one name per line), or the embedded census names when PATH is None."""
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise CorpusError(f"--data {path}: cannot read it ({exc.strerror})") from None
        return _clean(text.splitlines(), str(p))
    pkg = resources.files("names")
    seen = {w.lower() for name in _DEFAULT_FILES for w in _FIRST_FIELD.findall(pkg.joinpath(name).read_text())}
    return Corpus(tuple(sorted(seen)), DEFAULT_SOURCE)  # letters only, by the regex
