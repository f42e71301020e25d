"""Turn what was gathered from one submission into a Submission: one source per exercise, chosen by a stated rule.

The rule, per exercise: candidates are regular files named like the exercise (`ex1.py`, `Ex1.py`,
`backprop_ex1.py`, `ex1 (1).py`, Canvas's `login_123_456_ex1.py`) anywhere in the submission, archives in it
included. A candidate identical to the released stub is dropped when any other candidate exists, and so are
copies with the same text. If different candidates remain, the shallowest is graded, then the one named exactly
`exN.py`, then the first by path, and the student's result says AMBIGUOUS and names the files not graded.
Notebooks fill the exercises that no .py file gives.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.spec import EXERCISES
from grader.spec import parse as bounded
from grader.spec import stubs as spec_stubs
from grader.submissions.intake import messages as msg
from grader.submissions.intake.files import decode_source
from grader.submissions.intake.gather import Found, Gathered, exercise_of, is_notebook
from grader.submissions.sources import Source, Submission

STUBS = Path(__file__).resolve().parents[3] / "exercises"


@dataclass
class IntakeSubmission(Submission):
    """A Submission with intake's flags ('ambiguous', 'unreadable', 'stub', 'nothing', 'duplicate-id',
    'id-collision') and what its source says of when it came: late (Canvas), submitted_at (Gradescope)."""

    flags: list[str] = field(default_factory=list)
    late: bool | None = None  # None: the source does not say
    submitted_at: str = ""

    def to_dict(self) -> dict:
        """Return what intake decided, with the flags and the lateness the source gives."""
        return {
            **super().to_dict(),
            **({"intake_flags": sorted(set(self.flags))} if self.flags else {}),
            **({"late": self.late} if self.late is not None else {}),
            **({"submitted_at": self.submitted_at} if self.submitted_at else {}),
        }


def _normal(text: str, seen: dict[str, str] | None = None) -> str:
    """Return text with its line ends, trailing blanks and surrounding blank lines made uniform (seen: a cache)."""
    if seen is not None and text in seen:
        return seen[text]
    out = "\n".join([line.rstrip() for line in text.strip().splitlines()])
    if seen is not None:
        seen[text] = out
    return out


def _stubs() -> dict[str, str]:
    """Return the stubs as released: the files in exercises/, or where one is filled in (an instructor's working
    copy), the committed one (git HEAD), as `grade release` ships; never a filled-in file."""
    stubs, committed = {}, None
    for ex in EXERCISES:
        try:
            data = (STUBS / f"{ex}.py").read_bytes()
            spec_stubs.check_stub(f"{ex}.py", data, str(STUBS))
        except (OSError, RuntimeError):
            if committed is None:
                try:
                    committed = spec_stubs.committed_stubs(STUBS.parent)[0]
                except (OSError, RuntimeError):
                    committed = {}
            data = committed.get(f"{ex}.py")
            if data is None or not _only_stubs(data.decode("utf-8", "replace")):
                continue
        try:
            stubs[ex] = _normal(decode_source(data))
        except (SyntaxError, UnicodeDecodeError):
            continue
    return stubs


_STUB_CACHE: dict[str, str] | None = None


def stub_texts() -> dict[str, str]:
    """Return the released stubs' normalised text per exercise (empty where the checkout has none)."""
    global _STUB_CACHE
    if _STUB_CACHE is None:
        _STUB_CACHE = _stubs()
    return _STUB_CACHE


def _gives(sources: dict, ex: str) -> bool:
    """Return whether a notebook's converted exercise holds any work: a function that does not only raise."""
    return ex in sources and _implemented(sources[ex].text) != 0


def _implemented(text: str) -> int:
    """Return how many top-level functions do more than raise NotImplementedError (-1 if the text does not parse)."""
    import ast

    try:
        tree = bounded.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return -1
    last = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}  # later defs win
    return sum(not spec_stubs.is_stub_body(f.body) for f in last.values())


def _only_stubs(text: str) -> bool:
    """Return whether a file is a stub in all but its wording: imports, docstrings, functions that only raise."""

    if "NotImplementedError" not in text:
        return False
    try:
        spec_stubs.check_stub("", text.encode("utf-8", "surrogatepass"), "")
    except (RuntimeError, UnicodeError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _decoded(f: Found) -> tuple[str | None, str | None]:
    """Return (text, None), (text, a note on how it was read) or (None, why it cannot be read)."""
    if f.data is None:
        return None, msg.UNREADABLE.format(label=f.name, error=f.error)
    try:
        return decode_source(f.data), None
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        if b"coding" in f.data[:400] or f.data.startswith(b"\xef\xbb\xbf"):
            return None, msg.UNDECODABLE.format(label=f.name, error=exc)
    # not UTF-8 and no coding line: a Windows editor's `’` or `é` in a comment; Windows-1252 reads any byte
    text = f.data.decode("cp1252", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return text, msg.READ_AS_CP1252.format(label=f.name)


def _rank(ex: str, f: Found) -> tuple:
    return (f.depth, f.name.rsplit("/", 1)[-1] != f"{ex}.py", f.name)


def choose(
    name: str,
    gathered: Gathered,
    identity: dict | None = None,
    notes=(),
    *,
    flags=(),
    late: bool | None = None,
    submitted_at: str = "",
) -> IntakeSubmission:
    """Pick one source per exercise from the gathered files, saying in the notes what was graded and why."""
    sub = IntakeSubmission(name, identity=dict(identity or {}), notes=list(notes) + list(gathered.notes))
    sub.flags += list(flags)  # what discovery found: duplicate-id, id-collision
    sub.late, sub.submitted_at = late, submitted_at
    if "claimed_sid" in sub.identity:  # another Gradescope folder names the same student (discover._contested)
        sub.flags.append("duplicate-id")
    stubs = stub_texts()
    notebooks = [f for f in gathered.files if is_notebook(f.name.rsplit("/", 1)[-1])]
    stub_only: dict[str, list] = {}  # exercise -> its stub files, when a notebook may still give it
    exercises = [exercise_of(f.name.rsplit("/", 1)[-1]) for f in gathered.files]  # once per file, not per exercise
    normal: dict[str, str] = {}  # text -> _normal(text): each text normalised once
    for ex in EXERCISES:
        cands = [f for f, of in zip(gathered.files, exercises, strict=True) if of == ex]
        if not cands:
            continue
        readable, errors = [], []
        for f in sorted(cands, key=lambda f: _rank(ex, f)):
            text, error = _decoded(f)
            if text is None:
                errors.append(error)
            else:
                readable.append((f, text))
                if error:  # read all the same, with a note (not UTF-8, no coding line)
                    sub.notes.append(error)
        if not readable:
            sub.problems[ex] = errors[0]
            sub.notes += errors
            sub.flags.append("unreadable")
            continue
        is_stub = [stubs.get(ex) == _normal(t, normal) or _only_stubs(t) for _, t in readable]
        if all(is_stub) and notebooks:  # the released bundle, zipped whole: its notebook may hold the work
            stub_only[ex] = readable
            sub.notes += errors
            continue
        pool = [r for r, s in zip(readable, is_stub, strict=True) if not s] or readable
        if len(pool) > 1:  # stable: the most complete, then _rank (shallowest, ...); one candidate is not parsed
            pool.sort(key=lambda r: -_implemented(r[1]))
        chosen, text = pool[0]
        sub.sources[ex] = Source(ex, chosen.name, text, chosen.name)
        sub.notes.append(msg.GRADED_FILE.format(exercise=ex, label=chosen.name))
        if len(pool) < len(readable):
            labels = ", ".join(f.name for (f, _), s in zip(readable, is_stub, strict=True) if s)
            sub.notes.append(msg.STUB_IGNORED.format(exercise=ex, labels=labels))
        elif all(is_stub):
            sub.notes.append(msg.STUB_ONLY.format(exercise=ex, label=chosen.name))
            sub.flags.append("stub")
        same = _normal(text, normal)  # a copy that differs in trailing blanks or the last newline is the same copy
        dups = [f.name for f, t in pool[1:] if _normal(t, normal) == same]
        if dups:
            sub.notes.append(msg.DUPLICATES_IGNORED.format(exercise=ex, labels=", ".join(dups)))
        others = [f.name for f, t in pool[1:] if _normal(t, normal) != same]
        if others:
            count = len({_normal(t, normal) for _, t in pool})
            sub.notes.append(
                msg.AMBIGUOUS.format(exercise=ex, count=count, label=chosen.name, others=", ".join(others))
            )
            sub.flags.append("ambiguous")
        sub.notes += errors
    _add_notebooks(sub, notebooks)
    for ex, readable in stub_only.items():
        labels = ", ".join(f.name for f, _ in readable)
        if ex in sub.sources:
            sub.notes.append(msg.STUB_IGNORED.format(exercise=ex, labels=labels))
            continue
        (chosen, text), *_ = readable
        sub.sources[ex] = Source(ex, chosen.name, text, chosen.name)
        sub.notes += [
            msg.GRADED_FILE.format(exercise=ex, label=chosen.name),
            msg.STUB_ONLY.format(exercise=ex, label=chosen.name),
        ]
        sub.flags.append("stub")
    if not sub.sources and not sub.problems:
        sub.notes.append(msg.NOTHING_FOUND)
        sub.flags.append("nothing")
    return sub


def _notebook_reader():
    try:
        from grader.submissions.notebook import notebook_sources  # written separately; absent in older checkouts
    except ImportError:
        return None
    return notebook_sources


def _add_notebooks(sub: IntakeSubmission, notebooks: list[Found]) -> None:
    """Fill the exercises no .py file gave from the submission's notebooks.

    Each exercise comes from the notebook that gives the most of the missing exercises, then the shallowest,
    then the first by name; another notebook giving the same exercise differently flags it `ambiguous`.
    """
    if not notebooks:
        return
    missing = [ex for ex in EXERCISES if ex not in sub.sources and ex not in sub.problems]
    reader = _notebook_reader()
    read = []  # (notebook, its sources, its notes)
    for nb in sorted(notebooks, key=lambda f: (f.depth, f.name)):
        if not missing:
            sub.notes.append(msg.NOTEBOOK_SHADOWED.format(name=nb.name))
        elif reader is None:
            sub.notes.append(msg.NOTEBOOK_NOTE.format(name=nb.name, note=msg.NOTEBOOKS_UNSUPPORTED))
        elif nb.data is None:
            sub.notes.append(msg.UNREADABLE.format(label=nb.name, error=nb.error))
        else:
            with tempfile.TemporaryDirectory(prefix="grader-nb-") as tmp:
                path = Path(tmp) / Path(nb.name).name
                path.write_bytes(nb.data)
                sources, notes = reader(path)
            read.append((nb, path.name, sources, notes))
    read.sort(key=lambda r: -sum(_gives(r[2], ex) for ex in missing))  # stable: depth and name break ties
    wanted = tuple(f"{ex}:" for ex in missing)
    others = tuple(f"{ex}:" for ex in EXERCISES if ex not in missing)
    for nb, _, _, notes in read:
        kept = [n for n in notes if n.startswith(wanted) or not n.startswith(others)]  # not about a .py's exercise
        sub.notes += [msg.NOTEBOOK_NOTE.format(name=nb.name, note=n) for n in kept]
    for ex in missing:
        givers = [(nb, base, sources[ex]) for nb, base, sources, _ in read if _gives(sources, ex)]
        givers = givers or [(nb, base, sources[ex]) for nb, base, sources, _ in read if ex in sources]
        if not givers:
            continue
        nb, base, src = givers[0]
        label = src.label.replace(base, nb.name, 1) if src.label else nb.name
        sub.sources[ex] = dataclasses.replace(src, path=nb.name, label=label)
        sub.notes.append(msg.NOTEBOOK_USED.format(exercise=ex, label=label))
        differing = [other.name for other, _, s in givers[1:] if s.text != src.text]
        if differing:
            count = 1 + len({s.text for _, _, s in givers[1:] if s.text != src.text})
            shown = ", ".join(differing)
            sub.notes.append(msg.NOTEBOOK_AMBIGUOUS.format(exercise=ex, count=count, label=nb.name, others=shown))
            if "ambiguous" not in sub.flags:
                sub.flags.append("ambiguous")


def with_intake(result: dict, submission: Submission) -> dict:
    """Return a grading result dict with intake's decisions merged in; an unreadable file errors its items."""
    out = {**result, **submission.to_dict()}
    for item in out.get("items", []):
        problem = submission.problems.get(item.get("exercise"))
        if problem and item.get("status") == "not_attempted":
            item["status"], item["message"] = "error", problem
    return out
