"""Collect the files of one submission (a folder, an archive, Canvas files) without trusting any of them.

Only regular files are read: links, devices, FIFOs and sockets are noted and never opened, archive members
with absolute or '..' paths are refused, and every read has a size cap. Archives found inside a submission
(a zip in a student's folder, a tar.gz inside a zip) are opened too, two levels deep at most.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import stat
import struct
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.spec import EXERCISES
from grader.submissions.intake import messages as msg
from grader.submissions.intake.files import (
    MAX_ARCHIVE_BYTES,
    MAX_DEPTH,
    MAX_MEMBERS,
    MAX_NOTEBOOK_BYTES,
    MAX_SOURCE_BYTES,
    MAX_TOTAL_BYTES,
    Unreadable,
    human,
    read_regular,
)

SKIP_DIRS = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints", "node_modules", ".venv", "venv"}
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_NESTING = 2  # archives inside archives inside the submission
# Canvas's bulk download names each file `name[_LATE]_userid_fileid_original` (older Canvas wrote `late`): the name
# is the sortable name lower-cased with every character that is not a word character (a letter, mark, digit or
# connector, in any script) removed, and never holds `_digits_` (Canvas takes those out), so the shortest name that
# leaves `_digits_digits_` after it is the name. Anonymous grading writes `[LATE_]anon_anonymousid_fileid_original`.
CANVAS = re.compile(r"^(?P<login>[^/\\]+?)(?P<late>_(?i:late))?_(?P<uid>[0-9]+)_(?P<sub>[0-9]+)_(?P<file>.+)$", re.S)
CANVAS_ANONYMOUS = re.compile(r"^(?P<late>(?i:late)_)?anon_(?P<anon>[A-Za-z0-9]+)_(?P<sub>[0-9]+)_(?P<file>.+)$", re.S)
_EXERCISE = re.compile(r"(?<![a-z0-9])ex(?:ercise)?[ _-]?0?([1-9])(?![0-9])")  # ex1, ex_1, exercise-1, ex01
_ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    EOFError,
    OSError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    NotImplementedError,
    RuntimeError,
)


def _canvas_name(name: str) -> bool:
    """Return whether a name is one Canvas writes: word characters of any script (and '.', '-' of older Canvas)."""
    return all(unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc" or c in ".-" for c in name)


def canvas_file(filename: str) -> dict[str, str] | None:
    """Return the parts of a Canvas bulk-download file name, or None.

    {'login': the name part (NFC), 'late': '1' or '', 'uid': the Canvas user id ('' if anonymous),
    'anon': the anonymous id ('' unless anonymous), 'file': the name the student gave the file}.
    """
    m = CANVAS_ANONYMOUS.match(filename)
    if m is not None:
        return {"login": "", "late": "1" if m["late"] else "", "uid": "", "anon": m["anon"], "file": m["file"]}
    m = CANVAS.match(filename)
    if m is None or not _canvas_name(m["login"]):
        return None
    login = unicodedata.normalize("NFC", m["login"])  # a zip unpacked on macOS holds NFD names
    return {"login": login, "late": "1" if m["late"] else "", "uid": m["uid"], "anon": "", "file": m["file"]}


def exercise_of(filename: str) -> str | None:
    """Return the exercise a file name stands for ('Ex1.py', 'backprop_ex1.py', 'ex1 (1).py' -> 'ex1'), or None."""
    canvas = canvas_file(filename)  # the name in a Canvas file name may itself look like 'ex2...'
    lower = (canvas["file"] if canvas else filename).lower()
    if not lower.endswith(".py") or lower.startswith("."):
        return None
    found = {f"ex{m.group(1)}" for m in _EXERCISE.finditer(lower[:-3])}
    if len(found) != 1:
        return None
    (ex,) = found
    return ex if ex in EXERCISES else None


def archive_suffix(filename: str) -> str | None:
    """Return the archive suffix of a file name ('.tar.gz'), or None."""
    lower = filename.lower()
    return next((s for s in ARCHIVE_SUFFIXES if lower.endswith(s) and len(lower) > len(s)), None)


def is_notebook(filename: str) -> bool:
    """Return whether a file name is a Jupyter notebook."""
    return filename.lower().endswith(".ipynb") and not filename.startswith(".")


def relevant(filename: str) -> bool:
    """Return whether intake reads a file of this name: exercise files, notebooks and archives."""
    if filename.startswith("."):
        return False
    return bool(exercise_of(filename) or is_notebook(filename) or archive_suffix(filename))


@dataclass
class Found:
    """One candidate file of a submission, read (data) or not (error)."""

    name: str  # where it is inside the submission: 'hw/ex1.py', 'alice.zip/ex1.py'
    depth: int  # folders (and archives) above it inside the submission
    data: bytes | None = None
    error: str | None = None


@dataclass
class Gathered:
    """Everything collected from one submission: candidate files, and notes on what was not read."""

    files: list[Found] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    looked_at: int = 0
    total: int = 0
    stopped: bool = False

    def _count(self, where: str) -> bool:
        self.looked_at += 1
        if self.looked_at > MAX_MEMBERS:
            if not self.stopped:
                self.notes.append(msg.ARCHIVE_LIMIT.format(name=where, limit=f"{MAX_MEMBERS} files"))
            self.stopped = True
        return not self.stopped

    # -- one file, whatever it came from

    def add(self, name: str, depth: int, read: Callable[[int], bytes], nesting: int) -> None:
        """Read one relevant file with the cap its kind has; open it if it is an archive."""
        base = name.rsplit("/", 1)[-1]
        if archive_suffix(base):
            if nesting >= MAX_NESTING:
                self.notes.append(msg.SKIPPED_DEEP.format(name=name, depth=MAX_NESTING))
                return
            try:
                data = read(MAX_ARCHIVE_BYTES)
            except Unreadable as exc:
                self.notes.append(msg.ARCHIVE_UNREADABLE.format(name=name, error=exc))
                return
            self.archive(name, data, depth + 1, nesting + 1)
            return
        limit = MAX_NOTEBOOK_BYTES if is_notebook(base) else MAX_SOURCE_BYTES
        try:
            self.files.append(Found(name, depth, data=read(limit)))
        except Unreadable as exc:
            self.files.append(Found(name, depth, error=str(exc)))

    # -- a folder on disk

    def walk(self, root: Path, prefix: str = "", depth: int = 0) -> None:
        """Collect the relevant regular files below root; never follow a link, never open a special file."""
        try:
            with os.scandir(root) as it:
                entries = sorted(it, key=lambda d: d.name)
        except OSError as exc:
            self.notes.append(msg.UNREADABLE.format(label=prefix or root.name, error=exc.strerror or exc))
            return
        for de in entries:
            if not self._count(prefix or root.name):
                return
            name = prefix + de.name
            if de.is_symlink():
                if relevant(de.name):
                    self.notes.append(msg.SKIPPED_LINK.format(name=name))
                continue
            if de.is_dir(follow_symlinks=False):
                if de.name in SKIP_DIRS or de.name.startswith("."):
                    continue
                if relevant(de.name):
                    self.notes.append(msg.SKIPPED_DIR.format(name=name))
                if depth < MAX_DEPTH:
                    self.walk(Path(de.path), name + "/", depth + 1)
                continue
            if not relevant(de.name):
                continue
            if not de.is_file(follow_symlinks=False):
                self.notes.append(msg.SKIPPED_SPECIAL.format(name=name))
                continue
            self.add(name, depth, lambda limit, p=de.path: read_regular(p, limit), 0)

    # -- archives, from bytes already read

    def archive(self, name: str, data: bytes, depth: int, nesting: int) -> None:
        """Collect the relevant regular members of a zip or tar archive held in memory."""
        try:
            if data[:4] == b"PK\x03\x04" or name.lower().endswith(".zip"):
                self._zip(name, data, depth, nesting)
            else:
                self._tar(name, data, depth, nesting)
        except _ARCHIVE_ERRORS as exc:
            self.notes.append(msg.ARCHIVE_UNREADABLE.format(name=name, error=exc or type(exc).__name__))

    def _member(self, label: str, raw: str) -> tuple[str, list[str]] | None:
        """Return (shown name, path parts) of a member worth reading, or None; notes unsafe ones.

        label: what the shown name starts with ('alice.zip/'; '' inside a class's zip, as on disk)."""
        parts = PurePosixPath(raw.replace("\\", "/")).parts
        if not parts or not relevant(parts[-1]):
            return None
        if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1] if p != ".."):
            return None
        shown = f"{label}{raw}"
        if raw.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            self.notes.append(msg.SKIPPED_UNSAFE.format(name=shown))
            return None
        return shown, list(parts)

    def _budget(self, archive: str, size: int) -> bool:
        if self.total + size > MAX_TOTAL_BYTES:
            if not self.stopped:
                self.notes.append(msg.ARCHIVE_LIMIT.format(name=archive, limit=human(MAX_TOTAL_BYTES)))
            self.stopped = True
            return False
        return True

    def _zip(self, name: str, data: bytes, depth: int, nesting: int) -> None:
        declared = _zip_entries(data)
        if declared > MAX_MEMBERS:  # ZipFile() lists them all before the member limit could stop it
            raise zipfile.BadZipFile(
                f"it lists {declared} entries, more than {MAX_MEMBERS}; hand in the exercise files themselves"
            )
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            self.zip_members(zf, name, f"{name}/", depth, nesting)

    def zip_members(self, zf: zipfile.ZipFile, where: str, label: str, depth: int, nesting: int, prefix="") -> None:
        """Collect the relevant regular members of an open zip; with a prefix, only those below it, named from it.

        where: the name notes give the archive; label: what each shown name starts with."""
        for m in zf.infolist():
            raw = member_name(m)
            if prefix:  # one student's folder inside a class's zip: the rest of the zip is not theirs
                parts = member_parts(raw)  # None: an absolute or '..' path, listed in the class's skipped list
                raw = "/".join(parts or [])
                if parts is None or not raw.startswith(prefix):
                    continue
                raw = raw[len(prefix) :]
            if self.stopped or not self._count(where):
                return
            if m.is_dir():
                continue
            member = self._member(label, raw)
            if member is None:
                continue
            shown, parts = member
            problem = zip_member_problem(m)
            if problem is not None:
                self.notes.append(ZIP_PROBLEMS[problem][0].format(name=shown))
                continue

            def read(limit, m=m, shown=shown):
                if m.file_size > limit or not self._budget(shown, m.file_size):
                    raise Unreadable(f"larger than {human(limit)}")
                content = read_zip_member(zf, m, limit)
                self.total += len(content)
                return content

            self.add(shown, depth + len(parts) - 1, read, nesting)

    def _tar(self, name: str, data: bytes, depth: int, nesting: int) -> None:
        declared = 0
        with tarfile.open(fileobj=_Capped(_decompressed(data), MAX_TOTAL_BYTES), mode="r:") as tf:
            while True:
                m = tf.next()  # lazily: a bomb is stopped by the budget below before it is inflated
                if m is None or self.stopped or not self._count(name):
                    return
                declared += m.size if m.isreg() else 0
                if not self._budget(name, declared):
                    return
                if m.isdir():
                    continue
                member = self._member(f"{name}/", m.name)
                if member is None:
                    continue
                shown, parts = member
                if m.issym() or m.islnk():
                    self.notes.append(msg.SKIPPED_LINK.format(name=shown))
                    continue
                if not m.isreg():
                    self.notes.append(msg.SKIPPED_SPECIAL.format(name=shown))
                    continue

                def read(limit, m=m):
                    if m.size > limit:
                        raise Unreadable(f"larger than {human(limit)}")
                    try:
                        fh = tf.extractfile(m)
                        content = fh.read(limit + 1) if fh is not None else b""
                    except _ARCHIVE_ERRORS as exc:
                        raise Unreadable(str(exc) or type(exc).__name__) from exc
                    self.total += len(content)
                    return content

                self.add(shown, depth + len(parts) - 1, read, nesting)


# why a zip member is not read: the note in a student's result ({name}), and the reason when it is read on demand
ZIP_PROBLEMS = {
    "link": (msg.SKIPPED_LINK, "a symbolic link"),
    "special": (msg.SKIPPED_SPECIAL, "not a regular file"),
    "encrypted": (msg.SKIPPED_ENCRYPTED, "an encrypted member"),
    "compression": (msg.SKIPPED_COMPRESSION, "compressed with bzip2 or lzma, which is not read"),
}


def member_name(m: zipfile.ZipInfo) -> str:
    """Return a zip member's name as its writer meant it.

    A name without the UTF-8 flag, which zipfile reads as cp437, is taken from Info-ZIP's Unicode Path extra field
    (what `zip` on Linux writes) when that field matches the name, or else read as UTF-8 where its bytes are valid
    UTF-8 (a macOS or Windows archiver's), so `Zoë` stays `Zoë` and never becomes `Zo├½`.
    """
    if m.flag_bits & 0x800:
        return m.filename
    raw = m.filename.encode("cp437")  # the bytes as stored: cp437 maps every byte
    extra, at = m.extra, 0
    while at + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, at)
        body = extra[at + 4 : at + 4 + size]
        if tag == 0x7075 and len(body) > 5 and body[0] == 1 and struct.unpack_from("<I", body, 1)[0] == zlib.crc32(raw):
            try:
                return body[5:].decode("utf-8")
            except UnicodeDecodeError:
                break
        at += 4 + size
    if raw.isascii():
        return m.filename
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return m.filename


def member_parts(filename: str) -> list[str] | None:
    """Return a zip member's path as parts ('.' and empty parts dropped), or None for an absolute or '..' path."""
    name = filename.replace("\\", "/")
    if name.startswith("/") or ":" in name.split("/", 1)[0]:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return None if ".." in parts else parts


def zip_member_problem(m: zipfile.ZipInfo) -> str | None:
    """Return why a zip member is not read (a key of ZIP_PROBLEMS), or None if it can be."""
    mode = m.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        return "special"
    if m.flag_bits & 0x1:
        return "encrypted"
    if m.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        # zipfile inflates bzip2 and lzma members without a bound on the output (a 3 KB member became 4 GB); only
        # stored and deflate read in bounded steps. Every zip tool writes deflate.
        return "compression"
    return None


def read_zip_member(zf: zipfile.ZipFile, m: zipfile.ZipInfo, limit: int) -> bytes:
    """Return a zip member's bytes, at most `limit` whatever its header declares; raise Unreadable otherwise."""
    if m.file_size > limit:
        raise Unreadable(f"larger than {human(limit)}")
    try:
        with zf.open(m) as fh:
            content = fh.read(limit + 1)  # never trust the declared size
    except _ARCHIVE_ERRORS as exc:  # a bad CRC, an unknown method: this member only
        raise Unreadable(str(exc) or type(exc).__name__) from exc
    if len(content) > limit:
        raise Unreadable(f"larger than {human(limit)}")
    return content


def _zip_entries(data: bytes) -> int:
    """Return how many entries a zip's end-of-central-directory record declares (0 if it has none)."""
    return zip_entries(lambda offset, n: data[offset : offset + n], len(data))


def zip_entries(read_at: Callable[[int, int], bytes], size: int) -> int:
    """Return how many entries the end-of-central-directory record of a zip of `size` bytes declares (0 if none).

    read_at(offset, n): n bytes at offset (fewer at the end), so a zip on disk is read only at its tail."""
    start = max(0, size - (1 << 16) - 22)
    tail = read_at(start, size - start)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or end + 22 > len(tail):
        return 0
    (entries,) = struct.unpack_from("<H", tail, end + 10)
    locator = end - 20  # zip64: the count is in the zip64 record the locator points at
    if entries == 0xFFFF and locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        (record,) = struct.unpack_from("<Q", tail, locator + 8)
        head = read_at(record, 40) if record < size else b""
        if head[:4] == b"PK\x06\x06" and len(head) == 40:
            (entries,) = struct.unpack_from("<Q", head, 32)
    return entries


def _decompressed(data: bytes):
    """Return a tar's bytes as a file, decompressed on the fly if its magic says gzip, bzip2 or xz."""
    raw = io.BytesIO(data)
    if data[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)
    if data[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


class _Capped:
    """A file whose reads stop at a limit: tarfile reads a pax or GNU long-name header whole, whatever size it
    declares (3 GiB of zeros, from a 790 KB .tar.xz), before any member's size could be counted."""

    def __init__(self, f, limit: int):
        self.f, self.left, self.limit = f, limit, limit

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(self.left + 1 if size is None or size < 0 else min(size, self.left + 1))
        self.left -= len(data)
        if self.left < 0:
            more = human(self.limit)
            raise tarfile.ReadError(f"it unpacks to more than {more}; hand in the exercise files themselves")
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()


def gather_folder(folder: Path) -> Gathered:
    """Collect a student's folder."""
    g = Gathered()
    g.walk(folder)
    return g


def gather_files(files: list[tuple[str, Path | Callable[[int], bytes]]]) -> Gathered:
    """Collect loose files (an archive, a notebook, Canvas's renamed files), each shown under its name.

    Each file is a path, or a function that returns its bytes up to a limit (a member of a class's zip)."""
    g = Gathered()
    for shown, source in files:
        read = source if callable(source) else (lambda limit, p=source: read_regular(p, limit))
        g.looked_at += 1
        base = shown.rsplit("/", 1)[-1]
        if archive_suffix(base) and len(files) == 1:  # the entry is the archive: its members are at depth 0
            try:
                data = read(MAX_ARCHIVE_BYTES)
            except Unreadable as exc:
                g.notes.append(msg.ARCHIVE_UNREADABLE.format(name=shown, error=exc))
                continue
            g.archive(shown, data, 0, 1)
        elif relevant(base):
            g.add(shown, 0, read, 0)
    return g
