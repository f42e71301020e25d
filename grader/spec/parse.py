"""Parsing a student's source in the grader's own process, with its cost bounded before the parser runs.

ast.parse holds every node of a file at once: a 3.6 MB one-line expression takes about 2.6 GiB and 20 s. Source
up to SMALL characters is parsed as it is (tens of MB at worst); longer source is first counted in tokens with a
C-speed pattern, and refused beyond MAX_TOKENS, so no file or notebook cell costs more than ~150 MB to read.
"""

from __future__ import annotations

import ast
import re

SMALL = 64 << 10  # characters parsed without counting: every honest exercise file and cell is far below
MAX_TOKENS = 100_000  # ~15x the lecture's whole notebook
_TOKEN = re.compile(r"\w+|\S")


class TooLarge(ValueError):
    """Source with more tokens than the grader will parse: the message says how many, and what to do."""


def tokens_over(text: str, limit: int = MAX_TOKENS) -> int | None:
    """Return the token count of text if it is over limit (counting stops soon after), else None."""
    if len(text) <= SMALL:
        return None
    count = 0
    for count, _ in enumerate(_TOKEN.finditer(text), 1):
        if count > limit:
            return count
    return None


def too_large(where: str) -> TooLarge:
    """Return the error for source too large to read, naming where it is and what to do."""
    return TooLarge(
        f"{where} has more than {MAX_TOKENS:,} tokens, more than the grader reads (an exercise needs a few "
        "thousand): remove generated or pasted data and submit the code alone"
    )


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """Return ast.parse(text), or raise TooLarge before parsing source too large to read safely."""
    if tokens_over(text) is not None:
        raise too_large(filename)
    return ast.parse(text, filename=filename)
