"""A class holding every shape a submissions folder takes (issue #9 §1, issue #8 point 3), and what each is worth.

`build(root)` writes the class and returns (expected score per student, expected skipped entry -> reason).
"""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

from grader.submissions.intake import messages as msg
from tests.conftest import EXERCISES, REFERENCE

REF = {ex: (REFERENCE / f"{ex}.py").read_text() for ex in ("ex1", "ex2", "ex3", "ex4")}
STUB = {ex: (EXERCISES / f"{ex}.py").read_text() for ex in ("ex1", "ex2", "ex3", "ex4")}
POINTS = {"ex1": 26, "ex2": 2, "ex3": 4, "ex4": 10}
FULL = 42
# ex1's dC with the classic bug: 25/26 on ex1
BUGGY_EX1 = REF["ex1"] + "\n\ndef dC(C, Xb, demb):\n    d = torch.zeros_like(C)\n    d[Xb] += demb\n    return d\n"

GRADESCOPE_METADATA = """\
submission_111111:
  :submitters:
  - :name: Grace Hopper
    :sid: '20240001'
    :email: grace@example.edu
  :created_at: 2026-11-01 10:00:00.000000000 -07:00
  :score: !ruby/object:BigDecimal 18:0.42e2
submission_222222:
  :submitters:
  - :name: Alan Turing
    :sid: '20240002'
    :email: alan@example.edu
  :created_at: 2026-11-02 10:00:00.000000000 -07:00
"""


def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def _all(folder: Path, files: dict[str, str] | None = None) -> None:
    for ex, text in REF.items():
        _write(folder / f"{ex}.py", text)
    for name, text in (files or {}).items():
        _write(folder / name, text)


def _zip(path: Path, members: dict[str, bytes | str], symlinks: dict[str, str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)


def _tar(path: Path, members: dict[str, str], mode: str = "w:gz", links: dict[str, str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as tf:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE if target.startswith("/") else tarfile.LNKTYPE
            info.linkname = target
            tf.addfile(info)


def build(root: Path) -> tuple[dict[str, float], dict[str, str]]:
    """Write the class under root; return ({student: expected score}, {skipped entry: expected reason})."""
    root.mkdir(parents=True, exist_ok=True)
    scores: dict[str, float] = {}
    skipped: dict[str, str] = {}

    # a plain folder, and the same student also as a zip: one row, the zip is skipped with the rule
    _all(root / "alice")
    _zip(root / "alice.zip", {"ex1.py": BUGGY_EX1})
    scores["alice"] = FULL
    skipped["alice.zip"] = "also alice for the same student alice"

    # Canvas bulk download: loose renamed files, one late, one re-uploaded (-1)
    for k, ex in enumerate(REF):
        suffix = "-1" if ex == "ex3" else ""
        _write(root / f"carlos_1001_{2001 + k}_{ex}{suffix}.py", REF[ex])
    _write(root / "dana_late_1002_2010_ex1.py", REF["ex1"])
    scores["carlos@canvas"], scores["dana@canvas"] = FULL, POINTS["ex1"]

    # Canvas's whole download as Canvas names it, beside the rest: opened, its students graded from inside it
    # (names in any script; Canvas today writes LATE); canvas.csv gets their user ids
    _zip(
        root / "submissions.zip",
        {
            "müllerjürgen_41004_880404_ex1.py": REF["ex1"],
            "müllerjürgen_41004_880405_ex2.py": REF["ex2"],
            "王小明_LATE_41006_880407_ex3.py": REF["ex3"],
        },
    )
    scores["müllerjürgen@canvas"], scores["王小明@canvas"] = POINTS["ex1"] + POINTS["ex2"], POINTS["ex3"]
    skipped["submissions.zip"] = msg.DOWNLOAD_OPENED.format(what=msg.CANVAS_DOWNLOAD)

    # Gradescope export: keyed by the metadata's student id, the second one hands in a zip inside its folder
    _write(root / "submission_metadata.yml", GRADESCOPE_METADATA)
    _all(root / "submission_111111")
    _zip(root / "submission_222222" / "upload.zip", {f"work/{ex}.py": t for ex, t in REF.items()})
    scores["20240001@gradescope"] = scores["20240002@gradescope"] = FULL
    skipped["submission_metadata.yml"] = msg.METADATA_USED

    # archives: .tar.gz with a folder inside, .tgz flat
    _tar(root / "tara.tar.gz", {f"tara/{ex}.py": t for ex, t in REF.items()})
    _tar(root / "tom.tgz", {f"{ex}.py": t for ex, t in REF.items()})
    scores["tara"] = scores["tom"] = FULL

    # names as students really write them
    _write(root / "vera" / "Ex1.py", REF["ex1"])
    _write(root / "vera" / "backprop_ex2.py", REF["ex2"])
    _write(root / "vera" / "ex3 (1).py", REF["ex3"])
    _write(root / "vera" / "ex4.py", REF["ex4"])
    scores["vera"] = FULL

    # whole-repo uploads: stubs beside the solutions, either way round
    for ex in REF:
        _write(root / "wes" / "exercises" / f"{ex}.py", STUB[ex])
        _write(root / "wes" / f"{ex}.py", REF[ex])
        _write(root / "wren" / f"{ex}.py", STUB[ex])
        _write(root / "wren" / "exercises" / f"{ex}.py", REF[ex])
    scores["wes"] = scores["wren"] = FULL

    # encodings: a BOM with CRLF line ends, and a PEP 263 latin-1 cookie with a non-ASCII comment
    _write(root / "bom" / "ex1.py", b"\xef\xbb\xbf" + REF["ex1"].replace("\n", "\r\n").encode())
    cookie = "# -*- coding: latin-1 -*-\n# d\xe9riv\xe9e\n" + REF["ex2"]
    _write(root / "cookie" / "ex2.py", cookie.encode("latin-1"))
    scores["bom"], scores["cookie"] = POINTS["ex1"], POINTS["ex2"]

    # two different candidates for ex1 at the same depth: the rule picks ex1.py, and says so
    _write(root / "amb" / "ex1.py", REF["ex1"])
    _write(root / "amb" / "ex1 (1).py", BUGGY_EX1)
    scores["amb"] = POINTS["ex1"]

    # undecodable ex2 (not UTF-8, no cookie): its items are errors, the rest is graded
    _all(root / "badenc", {"ex2.py": REF["ex2"].encode() + b"\n# \xff\xfe\n"})
    scores["badenc"] = FULL  # not UTF-8, no coding line: read as Windows-1252, with a note

    # issue #8: a FIFO, a device link, a folder and a link to the reference, all named like exercise files
    hostile = root / "hostile"
    hostile.mkdir()
    os.mkfifo(hostile / "ex1.py")
    os.symlink("/dev/zero", hostile / "ex2.py")
    (hostile / "ex3.py").mkdir()
    _write(hostile / "ex4.py", REF["ex4"])
    os.symlink(REFERENCE / "ex3.py", hostile / "ex3.py" / "ex3.py")
    scores["hostile"] = POINTS["ex4"]

    # hostile archives: traversal, a symlink member, a member too large (a zip bomb), tar links
    big = "# " + " " * (2 << 20) + "\n" + REF["ex3"]
    _zip(
        root / "zipper.zip",
        {"../ex1.py": REF["ex1"], "ex3.py": big, "ex2.py": REF["ex2"]},
        symlinks={"ex4.py": "/work/main/reference/ex4.py"},
    )
    scores["zipper"] = POINTS["ex2"]
    _tar(root / "tarry.tar.gz", {"ex2.py": REF["ex2"]}, links={"ex1.py": "/etc/passwd", "ex4.py": "ex2.py"})
    scores["tarry"] = POINTS["ex2"]

    # a student id a spreadsheet would run as a formula
    _all(root / "=2+5")
    scores["=2+5"] = FULL

    # the stub alone: graded, 0, and flagged as the stub
    for ex in REF:
        _write(root / "stubby" / f"{ex}.py", STUB[ex])
    scores["stubby"] = 0

    # things that are not submissions
    _write(root / ".DS_Store", b"\0\0")
    _write(root / "notes.txt", "grading notes")
    _write(root / "ex1.py", REF["ex1"])
    (root / "__MACOSX").mkdir()
    os.symlink(root / "alice", root / "alias")
    os.mkfifo(root / "pipe.zip")
    skipped.update(
        {
            ".DS_Store": msg.HIDDEN,
            "notes.txt": msg.NOT_A_SUBMISSION,
            "ex1.py": msg.LOOSE_FILE,
            "__MACOSX": msg.SYSTEM_FOLDER,
            "alias": msg.TOP_SYMLINK,
            "pipe.zip": msg.NOT_REGULAR,
        }
    )
    return scores, skipped
