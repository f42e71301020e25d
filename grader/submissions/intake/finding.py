"""List a submissions folder: one Entry per student, and every other entry in a skipped list with its reason.

Recognised layouts, mixed freely: a folder, a .zip or a .tar(.gz) per student, named by the student id; a
notebook per student; a Canvas bulk download (loose `name[_LATE]_userid_fileid_file` files); a Gradescope
"export submissions" folder (`submission_NNN/` folders and `submission_metadata.yml` with names, emails and ids).
A folder or .zip holding a whole Canvas or Gradescope download (the folder's only entry, or named as they name it:
`submissions.zip`, `assignment_NNN_export`) is opened and graded as the class inside it; so is a .zip given as the
submissions folder itself. A class's zip is never unpacked: each student's files are read out of it when graded.

Student keys are namespaced by the source that says who the student is, so no source can produce another's key:
a folder, archive or notebook keeps its name (`ada`), a Canvas download's student is `ada@canvas`, a Gradescope
export's `20240001@gradescope` (a folder whose own name ends so gets `@local` added). The same id given by two
sources is two students, each graded from their own files, both flagged `id-collision` for the instructor.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.submissions.intake import messages as msg
from grader.submissions.intake.classzip import ClassZip, gather_zipped
from grader.submissions.intake.files import Unreadable, read_regular
from grader.submissions.intake.gather import (
    SKIP_DIRS,
    Gathered,
    archive_suffix,
    canvas_file,
    gather_files,
    gather_folder,
    is_notebook,
)
from grader.submissions.intake.read import IntakeSubmission, choose

FORMAT_VERSION = 2  # bump to invalidate --resume after an intake or grading change
GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_ID_BYTES = 120
MAX_OPEN = 2  # downloads opened inside downloads: a folder > submissions.zip > assignment_NNN_export/
_KINDS = ("folder", "archive", "notebook", "canvas")  # which one wins when a student has several
_RULE = "a folder is preferred to an archive, an archive to a notebook, then the first by name"
NAMESPACES = {"canvas": "@canvas", "gradescope": "@gradescope"}  # the key suffix of each source but a folder's
LOCAL_ESCAPE = "@local"  # added to a folder's name that ends like a namespaced key, so it stays its own
ID_COLLISION = "id-collision"
# what Canvas and Gradescope call their downloads (a browser adds " (1)" to a second copy)
_DOWNLOAD_NAME = re.compile(r"(?:.*[ _-])?submissions|assignment_[0-9]+_export", re.I)
_BROWSER_COPY = re.compile(r"(?: ?\([0-9]+\)|-[0-9]+)$")


@dataclass(frozen=True)
class Entry:
    """One student's submission: a folder, an archive, a notebook or a set of Canvas files."""

    student: str
    kind: str  # folder | archive | notebook | canvas
    paths: tuple[Path, ...]
    identity: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    source: str = "local"  # local | canvas | gradescope: what says who the student is
    members: tuple[str, ...] = ()  # in a class's zip (paths[0]): the folder's prefix ('a/b/'), or the files
    flags: tuple[str, ...] = ()  # intake flags known before the files are read (duplicate-id, id-collision)
    late: bool | None = None  # None: the source does not say
    submitted_at: str = ""

    @property
    def path(self) -> Path:
        """Return the entry's first path (its only one unless it is a set of Canvas files)."""
        return self.paths[0]

    def gather(self) -> Gathered:
        """Collect the entry's candidate files."""
        if self.members:
            return gather_zipped(self.paths[0], self.kind, self.members)
        if self.kind == "folder":
            return gather_folder(self.paths[0])
        if self.kind == "canvas":
            return gather_files([(p.name, p) for p in self.paths])
        return gather_files([(self.paths[0].name, self.paths[0])])

    def digest(self, options: str, gathered: Gathered | None = None) -> str:
        """Return a hash of everything intake reads from this entry and of the grading options, for --resume.

        gathered: what self.gather() returned, to hash the files read once for something else too (read_entry)."""

        def utf8(text: str) -> bytes:
            return text.encode("utf-8", "surrogatepass")  # a member name may hold bytes that are not UTF-8

        said = f"{self.kind}|{self.identity}|{self.notes}"
        more = (self.source, self.members, self.flags, self.late, self.submitted_at)
        if more != ("local", (), (), None, ""):  # a folder's digest reads as before these were known
            said += f"|{more}"
        h = hashlib.sha256(utf8(f"{FORMAT_VERSION}|{options}|{said}"))
        g = self.gather() if gathered is None else gathered
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
    canvas: list[tuple] = field(default_factory=list)  # (listing, (name, user id, anonymous id), [(file, parts)])


def _safe_id(text: str, fallback: str) -> str:
    """Return a student id usable as a file name and writable as UTF-8 (a CSV cell, a JSON string)."""
    raw = unicodedata.normalize("NFC", str(text))  # a name unpacked on macOS is NFD: one student, however written
    cleaned = "".join("_" if c in "/\\\0" or ord(c) < 32 else c for c in shown(raw)).strip()
    # students/<id>.json must stay a legal file name (255 bytes); a name with bytes that are not UTF-8 keeps a
    # tag of the original, so two such names stay two students
    if len(cleaned.encode()) > MAX_ID_BYTES or shown(raw) != raw:
        tag = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        cleaned = cleaned.encode()[: MAX_ID_BYTES - 11].decode(errors="ignore") + "-" + tag
    return fallback if cleaned in ("", ".", "..") else cleaned


_SURROGATE = re.compile("[\ud800-\udfff]")


def shown(name: str) -> str:
    """Return a name with the bytes a file name may hold that are not UTF-8 (lone surrogates) shown as U+FFFD.

    Also run on whole pages (report.html: megabytes), so the common case costs no loop in Python: a text UTF-8 can
    encode holds no surrogate and is returned as it is."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", name)
    return name


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
    """Return {submission folder: identity} from a folder's submission_metadata.yml; raise ValueError if unreadable."""
    try:
        data = read_regular(folder / GRADESCOPE_METADATA, 16 << 20)
    except Unreadable as exc:
        raise ValueError(str(exc)) from exc
    return {k: ident for k, (ident, _) in gradescope_records(data).items()}


def gradescope_records(data: bytes) -> dict[str, tuple[dict[str, str], str]]:
    """Return {submission folder: (identity, when it was submitted)} from submission_metadata.yml's bytes.

    Gradescope's export writes, per folder, `:submitters` (each with `:name`, `:sid`, `:email`) and `:created_at`
    (when the graded submission was made). It carries no due date, so it cannot say whether one was late.
    Raise ValueError if the file cannot be read."""
    import yaml  # here: only a Gradescope export needs it, and importing it costs every `grade` 60 ms

    try:
        data = yaml.load(data, Loader=_ruby_tolerant_loader())
    except (yaml.YAMLError, RecursionError, MemoryError) as exc:
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
        out[str(key)] = (fields, _when(value.get(":created_at") or value.get("created_at")))
    return out


def _when(value) -> str:
    """Return a submission time as ISO 8601 text ('' if there is none or it is not a time)."""
    if isinstance(value, datetime):
        return value.isoformat()
    return _field(value)[:64] if isinstance(value, str) else ""


def _field(value) -> str:
    """Return one identity field as text: a string (or number), at most 200 characters; anything else is empty."""
    return str(value).strip()[:200] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""


def _gradescope_key(folder: str, ident: dict[str, str]) -> str:
    """Return a Gradescope folder's id before its namespace: the first member's sid, else email, name, folder."""
    first = {k: v.split("; ")[0] for k, v in ident.items()}
    return _safe_id(first.get("sid") or first.get("email") or first.get("name") or folder, folder)


def _key(base: str, source: str) -> str:
    """Return the student key of an id from a source: its namespace added, so two sources never share a key."""
    if source in NAMESPACES:
        return base + NAMESPACES[source]
    return base + LOCAL_ESCAPE if base.endswith((*NAMESPACES.values(), LOCAL_ESCAPE)) else base


def _base(student: str, source: str) -> str:
    """Return the id a key was made from (the inverse of _key)."""
    suffix = NAMESPACES.get(source, LOCAL_ESCAPE)
    return student[: -len(suffix)] if student.endswith(suffix) else student


# -- listings: a folder on disk, or a folder of a class's zip


@dataclass(frozen=True)
class _Item:
    name: str
    kind: str  # dir | file | link | other | error
    error: str = ""


class _Disk:
    """A folder on disk; label: where it is in the run (prefixed to the names the skipped list shows)."""

    def __init__(self, path: Path, label: str = ""):
        self.path, self.label = path, label

    def items(self) -> list[_Item]:
        out = []
        for name in sorted(os.listdir(self.path)):
            try:
                mode = os.lstat(self.path / name).st_mode
            except OSError as exc:
                out.append(_Item(name, "error", exc.strerror or str(exc)))
                continue
            kind = "link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode) else "file"
            out.append(_Item(name, kind if kind != "file" or stat.S_ISREG(mode) else "other"))
        return out

    def child(self, name: str) -> _Disk:
        return _Disk(self.path / name, f"{self.label}{name}/")

    def read(self, name: str, limit: int) -> bytes:
        return read_regular(self.path / name, limit)

    def entry(self, student: str, kind: str, names, **kw) -> Entry:
        return Entry(student, kind, tuple(self.path / n for n in names), **kw)


class _Zipped:
    """A folder of a class's zip (prefix '' is its top)."""

    def __init__(self, cz: ClassZip, prefix: str = "", label: str = ""):
        self.cz, self.prefix, self.label = cz, prefix, label

    def items(self) -> list[_Item]:
        return [_Item(n, k) for n, k in sorted(self.cz.children.get(self.prefix, {}).items())]

    def child(self, name: str) -> _Zipped:
        return _Zipped(self.cz, f"{self.prefix}{name}/", f"{self.label}{name}/")

    def read(self, name: str, limit: int) -> bytes:
        return self.cz.read_member(self.prefix + name, limit)

    def entry(self, student: str, kind: str, names, **kw) -> Entry:
        members = tuple(self.prefix + n + ("/" if kind == "folder" else "") for n in names)
        return Entry(student, kind, (self.cz.path,), members=members, **kw)


def _candidate(item: _Item) -> bool:
    """Return whether a listed entry could be a submission (a file or folder, not hidden, not a system folder)."""
    return item.kind in ("dir", "file") and not item.name.startswith(".") and item.name not in SKIP_DIRS


def _why_not(item: _Item) -> str:
    """Return why an entry that is no candidate (_candidate) is not graded."""
    if item.name.startswith("."):
        return msg.HIDDEN
    if item.kind == "link":
        return msg.TOP_SYMLINK
    if item.kind == "dir":
        return msg.SYSTEM_FOLDER
    return msg.NOT_REGULAR if item.kind == "other" else msg.NOT_A_SUBMISSION


def _download(listing, wrapped: int = 0) -> str | None:
    """Return what LMS download a folder holds ('a Canvas bulk download', ...), or None if it holds none."""
    items = [i for i in listing.items() if _candidate(i)]
    if any(i.name == GRADESCOPE_METADATA and i.kind == "file" for i in items):
        return msg.GRADESCOPE_EXPORT
    folders = [i for i in items if i.kind == "dir"]
    if not folders and any(canvas_file(i.name) for i in items):
        return msg.CANVAS_DOWNLOAD
    if len(items) == 1 and folders and not wrapped:  # a zip of the download's folder: assignment_NNN_export/
        inner = _download(listing.child(folders[0].name), wrapped + 1)
        return msg.WRAPPER.format(what=inner) if inner else None
    return None


def _download_name(stem: str) -> bool:
    return _DOWNLOAD_NAME.fullmatch(_BROWSER_COPY.sub("", stem)) is not None


# -- discovery


def discover(folder: Path) -> tuple[list[Entry], list[Skipped]]:
    """List the students in a submissions folder (or a class's .zip), sorted by id, and every entry not graded
    with its reason."""
    folder = Path(folder)
    found = _Found()
    suffix = archive_suffix(folder.name)
    if folder.is_dir():
        _scan(_Disk(folder), found, 0)
    elif folder.is_file() and (suffix == ".zip" or (suffix is None and _zip_magic(folder))):
        try:
            cz = ClassZip(folder)
        except Unreadable as exc:
            return [], [Skipped(folder.name, msg.CLASS_ARCHIVE_UNREADABLE.format(name=folder.name, error=exc))]
        with cz:
            _scan_zip(cz, "", found, argument=True)
    else:
        return [], [Skipped(folder.name, msg.CLASS_NOT_ZIP if suffix else msg.CLASS_NOT_FOLDER)]
    _canvas_entries(found)
    return _resolve(_collisions(_uncontested(found.entries)), found.skipped)


def _zip_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def _scan_zip(cz: ClassZip, label: str, found: _Found, depth: int = 0, argument: bool = False) -> None:
    """List a class's zip: its students, its members that are never read.

    argument: the zip is the class given to grade batch; a zip of the class's folder holds just that folder, which
    is then the class (unless it is itself a download, opened as such)."""
    found.skipped += [Skipped(label + name, msg.UNSAFE_MEMBER.format(archive=cz.path.name)) for name in cz.unsafe]
    listing = _Zipped(cz, "", label)
    top = [i for i in listing.items() if _candidate(i)]
    if argument and len(top) == 1 and top[0].kind == "dir" and _download(listing.child(top[0].name)) is None:
        found.skipped += [Skipped(i.name, _why_not(i)) for i in listing.items() if i is not top[0]]
        found.skipped.append(Skipped(top[0].name, msg.CLASS_FOLDER))
        listing, depth = listing.child(top[0].name), depth + 1
    _scan(listing, found, depth)


def _scan(listing, found: _Found, depth: int) -> None:
    """List one folder (on disk or in a class's zip) into found: students, downloads opened, entries skipped."""
    items = listing.items()
    metadata: dict[str, tuple[dict[str, str], str]] | None = None  # None: no Gradescope export here
    if any(i.name == GRADESCOPE_METADATA and i.kind == "file" for i in items):
        where = listing.label + GRADESCOPE_METADATA
        try:
            metadata = gradescope_records(listing.read(GRADESCOPE_METADATA, 16 << 20))
        except (Unreadable, ValueError) as exc:
            metadata = {}
            found.skipped.append(Skipped(where, msg.METADATA_UNREADABLE.format(error=exc)))
        else:
            found.skipped.append(Skipped(where, msg.METADATA_USED))
    sole = len([i for i in items if _candidate(i) and i.name != GRADESCOPE_METADATA]) == 1
    canvas: dict[tuple[str, str, str], list[tuple[str, dict]]] = {}
    for item in items:
        name, where = item.name, listing.label + item.name
        if name == GRADESCOPE_METADATA and metadata is not None:
            continue
        if name.startswith("."):
            found.skipped.append(Skipped(where, msg.HIDDEN))
        elif item.kind == "error":
            found.skipped.append(Skipped(where, msg.UNREADABLE.format(label=name, error=item.error)))
        elif item.kind == "link":
            found.skipped.append(Skipped(where, msg.TOP_SYMLINK))
        elif item.kind == "dir":
            if name in SKIP_DIRS:
                found.skipped.append(Skipped(where, msg.SYSTEM_FOLDER))
            elif metadata is not None and (name in metadata or name.startswith("submission_")):
                _gradescope_entry(listing, name, metadata, found)
            elif depth < MAX_OPEN and (sole or _download_name(name)) and (what := _download(listing.child(name))):
                found.skipped.append(Skipped(where, msg.DOWNLOAD_OPENED.format(what=what)))
                _scan(listing.child(name), found, depth + 1)
            else:
                student = _key(_safe_id(name, "student"), "local")
                found.entries.append((student, 0, where, listing.entry(student, "folder", (name,))))
        elif item.kind != "file":
            found.skipped.append(Skipped(where, msg.NOT_REGULAR))
        elif (parts := canvas_file(name)) is not None:
            canvas.setdefault((parts["login"], parts["uid"], parts["anon"]), []).append((name, parts))
        elif suffix := archive_suffix(name):
            if suffix == ".zip" and isinstance(listing, _Disk) and depth < MAX_OPEN:
                if (sole or _download_name(name[: -len(suffix)])) and _open_download(listing, name, found, depth):
                    continue
            student = _key(_safe_id(name[: -len(suffix)], "student"), "local")
            found.entries.append((student, 1, where, listing.entry(student, "archive", (name,))))
        elif is_notebook(name):
            student = _key(_safe_id(name[: -len(".ipynb")], "student"), "local")
            found.entries.append((student, 2, where, listing.entry(student, "notebook", (name,))))
        elif name.lower().endswith(".py"):
            found.skipped.append(Skipped(where, msg.LOOSE_FILE))
        else:
            found.skipped.append(Skipped(where, msg.NOT_A_SUBMISSION))
    found.canvas += [(listing, who, files) for who, files in canvas.items()]


def _open_download(listing: _Disk, name: str, found: _Found, depth: int) -> bool:
    """Open a zip that holds a whole LMS download and list its class; return False if it holds none."""
    try:
        cz = ClassZip(listing.path / name)
    except Unreadable:
        return False  # graded as one student's archive, whose result says why it could not be read
    with cz:
        what = _download(_Zipped(cz))
        if what is None:
            return False
        found.skipped.append(Skipped(listing.label + name, msg.DOWNLOAD_OPENED.format(what=what)))
        _scan_zip(cz, f"{listing.label}{name}/", found, depth + 1)
    return True


def _gradescope_entry(listing, name: str, metadata: dict, found: _Found) -> None:
    """Add a submission_NNN folder of a Gradescope export, keyed by its metadata's student id."""
    where = listing.label + name
    if name in metadata:
        ident, when = metadata[name]
        notes = (f"Gradescope folder {name}",) + ((msg.SUBMITTED_AT.format(when=when),) if when else ())
        base = _gradescope_key(name, ident)
    else:
        ident, when = {}, ""
        notes = (msg.NOT_IN_METADATA.format(folder=shown(name)),) if metadata else ()
        base = _safe_id(name, "student")
    student = _key(base, "gradescope")
    kw = {"identity": tuple(sorted(ident.items())), "notes": notes, "source": "gradescope", "submitted_at": when}
    found.entries.append((student, 0, where, listing.entry(student, "folder", (name,), **kw)))


def _canvas_entries(found: _Found) -> None:
    """Add one entry per Canvas user; two users with the same name (namesakes) are keyed name_userid each."""
    uids: dict[str, set[str]] = {}
    for _, (login, uid, _), _ in found.canvas:
        uids.setdefault(login, set()).add(uid)
    for listing, (login, uid, anon), files in found.canvas:
        if anon:
            base, identity = f"anon_{anon}", {"canvas_anonymous_id": anon}
        else:
            base = login if len(uids[login]) == 1 else f"{login}_{uid}"  # namesakes keep their own grades
            identity = {"canvas_name": login, "canvas_id": uid}
        student = _key(_safe_id(base, "student"), "canvas")
        late = any(parts["late"] for _, parts in files)
        kw = {"identity": tuple(sorted(identity.items())), "source": "canvas", "late": late}
        entry = listing.entry(student, "canvas", tuple(n for n, _ in files), notes=(msg.CANVAS_LATE,) * late, **kw)
        found.entries.append((student, 3, listing.label + files[0][0], entry))


def _resolve(items: list, skipped: list[Skipped]) -> tuple[list[Entry], list[Skipped]]:
    """Keep one entry per student (by the stated rule) and list the others as skipped."""
    entries: list[Entry] = []
    by_student: dict[str, list[tuple[int, str, Entry]]] = {}
    for student, rank, name, entry in items:
        by_student.setdefault(student, []).append((rank, name, entry))
    for student in sorted(by_student):
        group = sorted(by_student[student], key=lambda t: (t[0], t[1]))
        _, kept_name, kept = group[0]
        extra = []
        for _, name, _ in group[1:]:
            reason = msg.SAME_STUDENT.format(other=shown(kept_name), student=student, rule=_RULE)
            skipped.append(Skipped(name, reason))
            extra.append(msg.ALSO_SUBMITTED.format(other=shown(name), rule=reason))
        if extra:
            kept = dataclasses.replace(kept, notes=kept.notes + tuple(extra))
        entries.append(kept)
    return entries, sorted(skipped, key=lambda s: s.name)


def _bases(e: Entry) -> set[str]:
    """Return the ids an entry goes by before its namespace (casefolded): its name, Canvas name, student ids."""
    ident = dict(e.identity)
    out = {_base(e.student, e.source)}
    if e.source == "canvas":
        out = {ident.get("canvas_name") or _base(e.student, e.source)}
    elif e.source == "gradescope":
        out |= {s for k in ("sid", "claimed_sid") for s in ident.get(k, "").split("; ") if s}
    return {unicodedata.normalize("NFC", b).casefold() for b in out}


def _collisions(items: list) -> list:
    """Flag id-collision every entry whose id another source also gives (each is still graded apart)."""
    holders: dict[str, list[int]] = {}
    for k, (_, _, _, e) in enumerate(items):
        for b in _bases(e):
            holders.setdefault(b, []).append(k)
    notes: dict[int, list[str]] = {}
    for b, ks in sorted(holders.items()):
        if len({items[k][3].source for k in ks}) < 2:
            continue
        for k in ks:
            others = ", ".join(sorted({items[j][0] for j in ks if items[j][3].source != items[k][3].source}))
            notes.setdefault(k, []).append(msg.ID_COLLISION.format(id=b, others=others))
    for k, added in notes.items():
        student, rank, name, e = items[k]
        flags = e.flags if ID_COLLISION in e.flags else (*e.flags, ID_COLLISION)
        items[k] = (student, rank, name, dataclasses.replace(e, notes=(*e.notes, *added), flags=flags))
    return items


def _claims(entry: Entry) -> bool:
    """Return whether an entry is a Gradescope folder: who it is comes from submission_metadata.yml."""
    return entry.source == "gradescope" and bool(entry.identity)


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
        # a Gradescope key is shared only by Gradescope entries (namespaces); a folder missing from the metadata
        # (keyed by its name) is renamed too, so a made-up id equal to its name cannot push it out
        clashes = [ks for ks in keys.values() if len(ks) > 1 and any(items[k][3].source == "gradescope" for k in ks)]
        if not clashes:
            break
        for ks in clashes:
            for k in ks:
                student, rank, name, e = items[k]
                if e.source != "gradescope":
                    continue
                if _claims(e):
                    others = ", ".join(shown(items[j][2]) for j in ks if j != k)
                    e = _contested(e, "", msg.DUPLICATE_ID.format(student=_base(student, e.source), others=others))
                key = _key(_safe_id(f"{_base(student, e.source)}_{name}", name), e.source)
                items[k] = (key, rank, name, dataclasses.replace(e, student=key))
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
    flags = e.flags if "duplicate-id" in e.flags else (*e.flags, "duplicate-id")
    return dataclasses.replace(e, identity=tuple(sorted(ident.items())), notes=(*e.notes, note), flags=flags)


def read_entry(entry: Entry, gathered: Gathered | None = None) -> IntakeSubmission:
    """Read one student's entry into a Submission; anything wrong with the files ends in its notes, never raises.

    gathered: what entry.gather() returned (read once, for its digest too); None to gather it here."""
    return choose(
        entry.student,
        entry.gather() if gathered is None else gathered,
        dict(entry.identity),
        entry.notes,
        flags=entry.flags,
        late=entry.late,
        submitted_at=entry.submitted_at,
    )


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
