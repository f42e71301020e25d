"""How a hostile case becomes a student's files: its parts appended to exercise files, hidden from the scan if it says.

A case's first line is `# expect: exercise=ex1 item=... status=... (message|flag)=...`; `# --- ex2.py` lines start
the parts appended to other exercises' files. A case whose second line is `# scan: evaded` tests a wall behind the
static scan (the syscall allow-list, the parent's own checks): its code reaches the sandbox through exec of its
bytes, as an attacker who evades the scan's words would, so the scan's refusal of routes out does not stop it first.
"""

from __future__ import annotations

import re
from pathlib import Path

HOSTILE = sorted((Path(__file__).parent / "hostile").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*exercise=(\S+)\s+item=(\S+)\s+status=(\S+)\s+(message|flag)=(.+)")
SECTION = re.compile(r"^# --- (ex\d)\.py$", re.M)
EVADED = "# scan: evaded"


def expectation(path: Path):
    """Return (exercise, item id, status, (kind, text)) from a case's first line."""
    match = EXPECT.match(path.read_text().splitlines()[0])
    assert match, path
    exercise, item, status, kind, text = match.groups()
    return exercise, item, status, (kind, text)


def parts(text: str) -> list[tuple[str, str]]:
    """Return [(exercise, code to append to its file)] for a case's text, its first part for the expected one."""
    exercise = EXPECT.match(text.splitlines()[0]).group(1)
    split = SECTION.split(text)  # [first part, 'ex2', its part, ...]
    out = [(exercise, split[0]), *zip(split[1::2], split[2::2], strict=True)]
    if EVADED in text.splitlines()[1:2]:
        out = [(ex, evaded(part)) for ex, part in out]
    return out


def evaded(code: str) -> str:
    """Return code that runs `code` through exec of its bytes: no word of it is left for the static scan."""
    return f"exec(bytes.fromhex({code.encode().hex()!r}).decode(), globals())\n"


def touched(text: str) -> set[str]:
    """Return the exercises a case's parts go to."""
    return {ex for ex, _ in parts(text)}


def wrong_verdict(path: Path, result: dict) -> str | None:
    """Say how a graded hostile case misses its pinned verdict (its item's status, message or flag, and every
    exercise it does not touch passed); None when it gets it."""
    _, item_id, status, (kind, text) = expectation(path)
    item = next(i for i in result["items"] if i["id"] == item_id)
    ok = status == "any" or item["status"] == status
    if kind == "flag":
        ok = ok and bool(result.get("flags", {}).get(text.strip()))
    else:
        ok = ok and (text.strip() in item["message"] or text.strip() in item["traps"])
    others = [i for i in result["items"] if i["exercise"] not in touched(path.read_text())]
    if ok and all(i["status"] == "passed" for i in others):
        return None
    return f"{path.stem}: {item['status']} {item['message'][:160]!r}"
