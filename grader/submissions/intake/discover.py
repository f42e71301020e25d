"""List a submissions folder: one Entry per student, and every other entry in a skipped list with its reason.

Recognised layouts, mixed freely: a folder, a .zip or a .tar(.gz) per student, named by the student id; a
notebook per student; a Canvas bulk download (loose `login[_late]_userid_submissionid_file` files); a Gradescope
"export submissions" folder (`submission_NNN/` folders and `submission_metadata.yml` with names, emails and ids).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.submissions.intake import messages as msg
from grader.submissions.intake.files import Unreadable, read_regular
from grader.submissions.intake.gather import (
    CANVAS,
    SKIP_DIRS,
    Gathered,
    archive_suffix,
    gather_files,
    gather_folder,
    is_notebook,
)
from grader.submissions.intake.read import IntakeSubmission, choose

FORMAT_VERSION = 2  # bump to invalidate --resume after an intake or grading change
GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_ID_BYTES = 120
_KINDS = ("folder", "archive", "notebook", "canvas")  # which one wins when a student has several
_RULE = "a folder is preferred to an archive, an archive to a notebook, a notebook to Canvas files"


@dataclass(frozen=True)
class Entry:
    """One student's submission: a folder, an archive, a notebook or a set of Canvas files."""

    student: str
    kind: str  # folder | archive | notebook | canvas
    paths: tuple[Path, ...]
    identity: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        """Return the entry's first path (its only one unless it is a set of Canvas files)."""
        return self.paths[0]

    def gather(self) -> Gathered:
        """Collect the entry's candidate files."""
        if self.kind == "folder":
            return gather_folder(self.paths[0])
        if self.kind == "canvas":
            return gather_files([(p.name, p) for p in self.paths])
        return gather_files([(self.paths[0].name, self.paths[0])])

    def digest(self, options: str) -> str:
        """Return a hash of everything intake reads from this entry and of the grading options, for --resume."""

        def utf8(text: str) -> bytes:
            return text.encode("utf-8", "surrogatepass")  # a member name may hold bytes that are not UTF-8

        h = hashlib.sha256(utf8(f"{FORMAT_VERSION}|{options}|{self.kind}|{self.identity}|{self.notes}"))
        g = self.gather()
        for note in g.notes:
            h.update(b"note\0" + utf8(note) + b"\0")
        for f in g.files:
            h.update(utf8(f"{f.name}\0{f.depth}\0{f.error}\0{len(f.data or b'')}\0"))
            h.update(f.data or b"")
        return h.hexdigest()


@dataclass(frozen=True)
class Skipped:
    """An entry of the submissions folder that is not graded, and why."""

    name: str
    reason: str

    def __post_init__(self):
        # a file name may hold bytes that are not UTF-8: shown as U+FFFD, so every output can write it
        object.__setattr__(self, "name", shown(self.name))
        object.__setattr__(self, "reason", shown(self.reason))

    def to_dict(self) -> dict:
        """Return the entry for summary.json."""
        return {"name": self.name, "reason": self.reason}


@dataclass
class _Found:
    entries: list[tuple[str, int, str, Entry]] = field(default_factory=list)  # (student, kind rank, name, entry)
    skipped: list[Skipped] = field(default_factory=list)


def _safe_id(text: str, fallback: str) -> str:
    """Return a student id usable as a file name and writable as UTF-8 (a CSV cell, a JSON string)."""
    raw = str(text)
    cleaned = "".join("_" if c in "/\\\0" or ord(c) < 32 else c for c in shown(raw)).strip()
    # students/<id>.json must stay a legal file name (255 bytes); a name with bytes that are not UTF-8 keeps a
    # tag of the original, so two such names stay two students
    if len(cleaned.encode()) > MAX_ID_BYTES or shown(raw) != raw:
        tag = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        cleaned = cleaned.encode()[: MAX_ID_BYTES - 11].decode(errors="ignore") + "-" + tag
    return fallback if cleaned in ("", ".", "..") else cleaned


def shown(name: str) -> str:
    """Return a name with the bytes a file name may hold that are not UTF-8 (lone surrogates) shown as U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in name)


@functools.cache
def _ruby_tolerant_loader():
    """Return a safe YAML loader that reads Ruby-tagged values (Gradescope writes some) as plain data."""
    import yaml  # here: only a Gradescope export needs it, and importing it costs every `grade` 60 ms

    class RubyTolerantLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):  # Gradescope writes none; nested ones expand to gigabytes
                raise yaml.YAMLError("aliases (*name) are not accepted in submission_metadata.yml")
            return super().compose_node(parent, index)

    def plain(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        return loader.construct_scalar(node)

    RubyTolerantLoader.add_multi_constructor("!", plain)
    return RubyTolerantLoader


def gradescope_metadata(folder: Path) -> dict[str, dict[str, str]]:
    """Return {submission folder: identity} from submission_metadata.yml; raise ValueError if unreadable."""
    import yaml

    try:
        data = yaml.load(read_regular(folder / GRADESCOPE_METADATA, 16 << 20), Loader=_ruby_tolerant_loader())
    except (Unreadable, yaml.YAMLError, RecursionError, MemoryError) as exc:
        raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    if not isinstance(data, dict):
        raise ValueError("not a mapping of submission folders")
    out = {}
    for key, value in data.items():
        if not isinstance(value, dict):
            continue
        people = value.get(":submitters") or value.get("submitters") or []
        people = [p for p in people if isinstance(p, dict)] if isinstance(people, list) else []
        fields = {}
        for field_name in ("name", "email", "sid"):
            # one value per member, empties kept so members stay aligned; a ';' inside a value would make two
            vals = [_field(p.get(f":{field_name}") or p.get(field_name)).replace(";", ",") for p in people]
            if any(vals):
                fields[field_name] = "; ".join(vals)
        out[str(key)] = fields
    return out


def _field(value) -> str:
    """Return one identity field as text: a string (or number), at most 200 characters; anything else is empty."""
    return str(value).strip()[:200] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""


def _gradescope_key(folder: str, ident: dict[str, str]) -> str:
    first = {k: v.split("; ")[0] for k, v in ident.items()}
    return _safe_id(first.get("sid") or first.get("email") or first.get("name") or folder, folder)


def discover(folder: Path) -> tuple[list[Entry], list[Skipped]]:
    """List the students in a submissions folder, sorted by id, and every entry not graded with its reason."""
    found = _Found()
    names = sorted(os.listdir(folder))
    metadata: dict[str, dict[str, str]] = {}
    if GRADESCOPE_METADATA in names:
        try:
            metadata = gradescope_metadata(folder)
        except ValueError as exc:
            found.skipped.append(Skipped(GRADESCOPE_METADATA, msg.METADATA_UNREADABLE.format(error=exc)))
        else:
            found.skipped.append(Skipped(GRADESCOPE_METADATA, msg.METADATA_USED))
        names.remove(GRADESCOPE_METADATA)
    canvas: dict[str, list[tuple[Path, re.Match]]] = {}
    for name in names:
        path = folder / name
        if name.startswith("."):
            found.skipped.append(Skipped(name, msg.HIDDEN))
            continue
        try:
            mode = os.lstat(path).st_mode
        except OSError as exc:
            found.skipped.append(Skipped(name, msg.UNREADABLE.format(label=name, error=exc.strerror)))
            continue
        if stat.S_ISLNK(mode):
            found.skipped.append(Skipped(name, msg.TOP_SYMLINK))
        elif stat.S_ISDIR(mode):
            if name in SKIP_DIRS:
                found.skipped.append(Skipped(name, msg.SYSTEM_FOLDER))
            elif metadata and name in metadata:
                ident = metadata[name]
                student = _gradescope_key(name, ident)
                entry = Entry(student, "folder", (path,), tuple(sorted(ident.items())), (f"Gradescope folder {name}",))
                found.entries.append((student, 0, name, entry))
            else:
                stray = metadata and name.startswith("submission_")
                notes = (msg.NOT_IN_METADATA.format(folder=shown(name)),) if stray else ()
                student = _safe_id(name, "student")
                found.entries.append((student, 0, name, Entry(student, "folder", (path,), notes=notes)))
        elif not stat.S_ISREG(mode):
            found.skipped.append(Skipped(name, msg.NOT_REGULAR))
        elif (m := CANVAS.match(name)) is not None:
            canvas.setdefault((m["login"], m["uid"]), []).append((path, m))  # by user: two may share a name
        elif suffix := archive_suffix(name):
            student = _safe_id(name[: -len(suffix)], "student")
            found.entries.append((student, 1, name, Entry(student, "archive", (path,))))
        elif is_notebook(name):
            student = _safe_id(name[: -len(".ipynb")], "student")
            found.entries.append((student, 2, name, Entry(student, "notebook", (path,))))
        elif name.lower().endswith(".py"):
            found.skipped.append(Skipped(name, msg.LOOSE_FILE))
        else:
            found.skipped.append(Skipped(name, msg.NOT_A_SUBMISSION))
    logins = [login for login, _ in canvas]
    for (login, uid), files in canvas.items():
        student = login if logins.count(login) == 1 else f"{login}_{uid}"  # namesakes keep their own grades
        identity = {"login": login, "canvas_id": uid}
        notes = (msg.CANVAS_LATE,) if any(m["late"] for _, m in files) else ()
        entry = Entry(student, "canvas", tuple(p for p, _ in files), tuple(sorted(identity.items())), notes)
        found.entries.append((student, 3, files[0][0].name, entry))
    return _resolve(found)


def _resolve(found: _Found) -> tuple[list[Entry], list[Skipped]]:
    """Keep one entry per student (by the stated rule) and list the others as skipped."""
    entries: list[Entry] = []
    by_student: dict[str, list[tuple[int, str, Entry]]] = {}
    for student, rank, name, entry in _uncontested(found.entries):
        by_student.setdefault(student, []).append((rank, name, entry))
    for student in sorted(by_student):
        group = sorted(by_student[student], key=lambda t: (t[0], t[1]))
        _, kept_name, kept = group[0]
        extra = []
        for _, name, _ in group[1:]:
            reason = msg.SAME_STUDENT.format(other=shown(kept_name), student=student, rule=_RULE)
            found.skipped.append(Skipped(name, reason))
            extra.append(msg.ALSO_SUBMITTED.format(other=shown(name), rule=reason))
        if extra:
            kept = Entry(kept.student, kept.kind, kept.paths, kept.identity, kept.notes + tuple(extra))
        entries.append(kept)
    return entries, sorted(found.skipped, key=lambda s: s.name)


def _claims(entry: Entry) -> bool:
    """Return whether an entry is a Gradescope folder: who it is comes from submission_metadata.yml."""
    return entry.kind == "folder" and bool(entry.identity)


def _uncontested(found: list) -> list:
    """Return the (student, rank, name, entry) list with every contested Gradescope claim graded apart.

    A student id in submission_metadata.yml is what a student's profile says; two folders saying the same (one
    submitting alone, one in a group with that id as a member, or both alone) could be a roster mistake or one
    student claiming another's id. Each such folder keeps its own row: the shared id is taken out of its `sid`
    (kept as `claimed_sid`, so no gradebook import matches that row to the student), it is flagged
    duplicate-id, and two that share a key are renamed `key_folder`, again until every key is its own, so a
    made-up id that equals a renamed one cannot push a row out either. The instructor decides who is who.
    """
    items = list(found)
    members: dict[str, list[int]] = {}
    for k, (_, _, _, e) in enumerate(items):
        if _claims(e):
            for sid in {x for x in dict(e.identity).get("sid", "").split("; ") if x}:
                members.setdefault(sid, []).append(k)
    for sid, holders in members.items():
        if len(holders) > 1:
            for k in holders:
                student, rank, name, e = items[k]
                others = ", ".join(shown(items[j][2]) for j in holders if j != k)
                items[k] = (
                    student,
                    rank,
                    name,
                    _contested(e, sid, msg.DUPLICATE_ID.format(student=sid, others=others)),
                )
    for _ in range(8):  # each round lengthens the keys it touches; two settle any collision made on purpose
        keys: dict[str, list[int]] = {}
        for k, (student, _, _, _) in enumerate(items):
            keys.setdefault(student, []).append(k)
        clashes = [ks for ks in keys.values() if len(ks) > 1 and sum(_claims(items[k][3]) for k in ks) > 1]
        if not clashes:
            break
        for ks in clashes:
            for k in ks:
                student, rank, name, e = items[k]
                if _claims(e):
                    others = ", ".join(shown(items[j][2]) for j in ks if j != k)
                    e = _contested(e, "", msg.DUPLICATE_ID.format(student=student, others=others))
                    key = _safe_id(f"{student}_{name}", name)
                    items[k] = (key, rank, name, Entry(key, e.kind, e.paths, e.identity, e.notes))
    return items


def _contested(e: Entry, sid: str, note: str) -> Entry:
    """Return a Gradescope entry flagged duplicate-id: sid (one member's) moved from `sid` to `claimed_sid`."""
    ident = dict(e.identity)
    sids = ident.get("sid", "").split("; ")
    claimed = [c for c in ident.get("claimed_sid", "").split("; ") if c]
    if sid and sid in sids:
        ident["sid"] = "; ".join("" if x == sid else x for x in sids)  # the group's other members keep theirs
        claimed.append(sid)
    ident["claimed_sid"] = "; ".join(claimed)
    if not ident.get("sid", "").replace(";", "").strip():
        ident.pop("sid", None)
    return Entry(e.student, e.kind, e.paths, tuple(sorted(ident.items())), (*e.notes, note))


def read_entry(entry: Entry) -> IntakeSubmission:
    """Read one student's entry into a Submission; anything wrong with the files ends in its notes, never raises."""
    return choose(entry.student, entry.gather(), dict(entry.identity), entry.notes)


def read_submission(path: Path) -> IntakeSubmission:
    """Read a single student's submission: a folder, an archive or a notebook."""
    path = Path(path)
    name = path.name
    if path.is_dir():
        return read_entry(Entry(name, "folder", (path,)))
    if suffix := archive_suffix(name):
        return read_entry(Entry(name[: -len(suffix)], "archive", (path,)))
    if is_notebook(name):
        return read_entry(Entry(name[: -len(".ipynb")], "notebook", (path,)))
    return read_entry(Entry(path.stem, "canvas", (path,)))
