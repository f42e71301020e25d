"""Read what a student put in the folder without ever following a link or opening a FIFO or device."""

from __future__ import annotations

import io
import os
import stat
import tokenize
from pathlib import Path

MAX_SOURCE_BYTES = 1 << 20  # one exercise file
MAX_NOTEBOOK_BYTES = 16 << 20
MAX_ARCHIVE_BYTES = 64 << 20  # one archive file, compressed
MAX_TOTAL_BYTES = 64 << 20  # everything read out of one submission's archives, uncompressed
MAX_MEMBERS = 10_000  # files or members looked at in one submission
MAX_DEPTH = 12  # folder depth walked
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Unreadable(Exception):
    """A file that is not a regular file, is too large, or could not be read."""


def human(n: int) -> str:
    """Return a byte count as '1 MiB' (or '4 GiB')."""
    if n >= 1 << 30:
        return f"{n >> 30} GiB"
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def read_regular(path: Path | str, limit: int) -> bytes:
    """Return a regular file's bytes (at most `limit`); raise Unreadable for anything else, without blocking."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:  # ELOOP: a symlink; ENXIO: a FIFO with no writer
        raise Unreadable(exc.strerror or str(exc)) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > limit:
            raise Unreadable(f"larger than {human(limit)}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f"larger than {human(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)


def open_regular(path: Path, limit: int):
    """Return a regular file (at most `limit` bytes) opened for binary reading; raise Unreadable for anything else.

    For a file read in parts (a class's zip), never whole: the same checks as read_regular, without the read."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > limit:
            raise Unreadable(f"larger than {human(limit)}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def decode_source(data: bytes) -> str:
    """Decode Python source as the interpreter does: BOM, PEP 263 coding cookie, universal newlines."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)  # SyntaxError for a bad cookie or BOM
    if encoding == "utf-8-sig":
        data = data.removeprefix(b"\xef\xbb\xbf")
        encoding = "utf-8"
    text = data.decode(encoding)  # UnicodeDecodeError, LookupError
    return text.replace("\r\n", "\n").replace("\r", "\n")
