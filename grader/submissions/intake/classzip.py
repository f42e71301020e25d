"""A whole class in one zip (Canvas's submissions.zip, a Gradescope export zipped): listed without unpacking it.

`ClassZip` lists the zip like a folder (which names each of its folders holds, and what each is), and each
student's files are read straight out of it when that student is graded (`gather_zipped`), in the grading process,
with the same rules as on disk: only regular members, never a link, no absolute or '..' path, every read capped.
Nothing is ever written to disk.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

from grader.submissions.intake import messages as msg
from grader.submissions.intake.files import Unreadable, open_regular
from grader.submissions.intake.gather import (
    _ARCHIVE_ERRORS,
    ZIP_PROBLEMS,
    Gathered,
    gather_files,
    member_name,
    member_parts,
    read_zip_member,
    zip_entries,
    zip_member_problem,
)

MAX_CLASS_ZIP_BYTES = 8 << 30  # read in parts, never whole: the bound is on what a listing may claim
MAX_CLASS_MEMBERS = 50_000  # files in a class's zip (a Canvas download of 500 students holds ~2,000)


def open_zip(path: Path) -> zipfile.ZipFile:
    """Return a class's zip opened for reading; raise Unreadable for a link, a special file or a zip that is not."""
    f = open_regular(path, MAX_CLASS_ZIP_BYTES)
    try:
        size = f.seek(0, 2)

        def read_at(offset: int, n: int) -> bytes:
            f.seek(offset)
            return f.read(n)

        declared = zip_entries(read_at, size)
        if declared > MAX_CLASS_MEMBERS:  # ZipFile() lists them all, in memory, before anything could stop it
            raise Unreadable(f"it lists {declared} entries, more than {MAX_CLASS_MEMBERS}")
        f.seek(0)
        return zipfile.ZipFile(f)
    except Unreadable:
        f.close()
        raise
    except _ARCHIVE_ERRORS as exc:
        f.close()
        raise Unreadable(str(exc) or type(exc).__name__) from exc


class ClassZip:
    """The listing of a zip on disk, folder by folder; read_member() reads one member, capped."""

    def __init__(self, path: Path):
        self.path = path
        self.zf = open_zip(path)
        self.children: dict[str, dict[str, str]] = {"": {}}  # "" or "a/b/" -> {name: dir | file | link | other}
        self.infos: dict[str, zipfile.ZipInfo] = {}  # "a/b/ex1.py" -> its first member of that name
        self.unsafe: list[str] = []  # members with an absolute or '..' path: never read
        for m in self.zf.infolist():
            name = member_name(m)
            parts = member_parts(name)
            if parts is None:
                self.unsafe.append(name)
                continue
            if not parts:
                continue
            for k in range(1, len(parts)):  # the folders a member's path implies, listed or not
                self._add(parts[:k], "dir")
            if m.is_dir():
                self._add(parts, "dir")
                continue
            problem = zip_member_problem(m)
            self._add(parts, {"link": "link", "special": "other"}.get(problem or "", "file"))
            self.infos.setdefault("/".join(parts), m)

    def _add(self, parts: list[str], kind: str) -> None:
        folder = "".join(p + "/" for p in parts[:-1])
        listing = self.children.setdefault(folder, {})
        if listing.get(parts[-1]) != "dir":  # a name that is a folder somewhere is a folder
            listing[parts[-1]] = kind
        if kind == "dir":
            self.children.setdefault(folder + parts[-1] + "/", {})

    def read_member(self, name: str, limit: int) -> bytes:
        """Return the bytes of member `name` ('a/b/file'), at most `limit`; raise Unreadable otherwise."""
        m = self.infos.get(name)
        if m is None:
            raise Unreadable("not a regular file")
        problem = zip_member_problem(m)
        if problem is not None:
            raise Unreadable(ZIP_PROBLEMS[problem][1])
        return read_zip_member(self.zf, m, limit)

    def close(self) -> None:
        """Close the zip."""
        fp = self.zf.fp
        self.zf.close()
        if fp is not None:
            fp.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def gather_zipped(archive: Path, kind: str, members: tuple[str, ...]) -> Gathered:
    """Collect one student's files from a class's zip: a folder of it (members = its prefix 'a/b/'), or files."""
    try:
        cz = ClassZip(archive)
    except Unreadable as exc:
        g = Gathered()
        g.notes.append(msg.ARCHIVE_UNREADABLE.format(name=archive.name, error=exc))
        return g
    with cz:
        if kind == "folder":
            g = Gathered()
            where = PurePosixPath(members[0]).name
            try:
                g.zip_members(cz.zf, where, "", 0, 0, prefix=members[0])
            except _ARCHIVE_ERRORS as exc:
                g.notes.append(msg.ARCHIVE_UNREADABLE.format(name=archive.name, error=exc or type(exc).__name__))
            return g
        files = [(PurePosixPath(name).name, lambda limit, n=name: cz.read_member(n, limit)) for name in members]
        return gather_files(files)
