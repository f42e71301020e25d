"""Intake: every entry of a submissions folder is graded or listed as skipped, with a reason (issues #8, #9)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.classroom.batch import grade_batch
from grader.classroom.reports import EMPTY_CLASS
from grader.classroom.reports.summary import summarize
from grader.classroom.reports.tables import CANVAS_COLUMNS, GRADEBOOK_COLUMNS, UNMATCHED_CONTESTED, canvas_gradebook
from grader.cli.main import main
from grader.sandbox import Limits
from grader.submissions.intake import decode_source, discover, read_entry, read_submission
from grader.submissions.intake import messages as msg
from grader.submissions.intake.files import MAX_SOURCE_BYTES, Unreadable, read_regular
from grader.submissions.intake.gather import exercise_of
from tests import shapes
from tests.conftest import EXERCISES, REFERENCE

LIMITS = Limits(timeout=2.0, memory_mb=1024)


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    """Grade the class of every shape twice, with --jobs 1 and --jobs 2."""
    root = tmp_path_factory.mktemp("shapes") / "class"
    scores, skipped = shapes.build(root)
    outs = []
    for jobs in (1, 2):
        out = tmp_path_factory.mktemp(f"out{jobs}")
        summary = grade_batch(root, out, jobs=jobs, limits=LIMITS, progress=False)
        outs.append((out, summary))
    return root, scores, skipped, outs


def _students(out: Path) -> dict[str, dict]:
    return {f.name[: -len(".json")]: json.loads(f.read_text()) for f in (out / "students").glob("*.json")}


def test_every_student_gets_the_score_their_code_deserves(shaped):
    _, scores, _, [(out, summary), _] = shaped
    got = {s: r["score"] for s, r in _students(out).items()}
    assert got == scores
    assert summary["students"] == len(scores)


def test_every_other_entry_is_listed_as_skipped_with_its_reason(shaped):
    root, scores, skipped, [(_, summary), _] = shaped
    listed = {s["name"]: s["reason"] for s in summary["skipped"]}
    assert set(listed) == set(skipped)
    for name, reason in skipped.items():
        assert reason in listed[name], name
    entries = set(os.listdir(root))
    graded_from = {e.path.name for e in discover(root)[0]} | {p.name for e in discover(root)[0] for p in e.paths}
    assert entries <= graded_from | set(listed), "every entry is graded or skipped"


def test_jobs_1_and_2_write_the_same_bytes(shaped):
    *_, [(out1, _), (out2, _)] = shaped
    files1 = sorted(p.relative_to(out1) for p in out1.rglob("*") if p.is_file())
    files2 = sorted(p.relative_to(out2) for p in out2.rglob("*") if p.is_file())
    assert files1 == files2
    assert {"gradebook.csv", "canvas.csv", "summary.json", "report.html"} <= {str(f) for f in files1}
    for f in files1:
        assert (out1 / f).read_bytes() == (out2 / f).read_bytes(), f


def test_the_result_says_which_file_was_graded_and_why(shaped):
    *_, [(out, _), _] = shaped
    st = _students(out)
    vera = {"ex1": "Ex1.py", "ex2": "backprop_ex2.py", "ex3": "ex3 (1).py", "ex4": "ex4.py"}
    assert st["vera"]["graded_files"] == vera
    assert st["wes"]["graded_files"]["ex1"] == "ex1.py"
    assert msg.STUB_IGNORED.format(exercise="ex1", labels="exercises/ex1.py") in st["wes"]["notes"]
    assert st["wren"]["graded_files"]["ex1"] == "exercises/ex1.py"
    assert "ambiguous" in st["amb"]["intake_flags"]
    assert any(n.startswith("ex1: AMBIGUOUS") and "not graded: ex1 (1).py" in n for n in st["amb"]["notes"])
    assert st["stubby"]["intake_flags"] == ["stub"]
    assert st["20240002@gradescope"]["graded_files"]["ex1"] == "upload.zip/work/ex1.py"
    assert st["tara"]["graded_files"]["ex4"] == "tara.tar.gz/tara/ex4.py"
    assert msg.CANVAS_LATE in st["dana@canvas"]["notes"] and st["dana@canvas"]["late"] is True
    assert st["王小明@canvas"]["late"] is True and st["müllerjürgen@canvas"]["late"] is False
    assert st["王小明@canvas"]["graded_files"] == {"ex3": "王小明_LATE_41006_880407_ex3.py"}
    assert st["carlos@canvas"]["late"] is False and "late" not in st["alice"]
    assert any(n.startswith("not graded: alice.zip") for n in st["alice"]["notes"])


def test_unreadable_and_hostile_files_are_noted_never_read(shaped):
    *_, [(out, _), _] = shaped
    st = _students(out)
    notes = st["hostile"]["notes"]
    assert msg.SKIPPED_SPECIAL.format(name="ex1.py") in notes  # the FIFO: never opened, so no hang
    assert msg.SKIPPED_LINK.format(name="ex2.py") in notes  # -> /dev/zero
    assert msg.SKIPPED_DIR.format(name="ex3.py") in notes
    assert msg.SKIPPED_LINK.format(name="ex3.py/ex3.py") in notes  # -> reference/ex3.py: not graded as theirs
    assert st["hostile"]["graded_files"] == {"ex4": "ex4.py"}
    zipper = st["zipper"]["notes"]
    assert msg.SKIPPED_UNSAFE.format(name="zipper.zip/../ex1.py") in zipper
    assert msg.SKIPPED_LINK.format(name="zipper.zip/ex4.py") in zipper
    ex3 = [i for i in st["zipper"]["items"] if i["exercise"] == "ex3"]
    assert all(i["status"] == "error" and "larger than 1 MiB" in i["message"] for i in ex3)
    assert msg.SKIPPED_LINK.format(name="tarry.tar.gz/ex1.py") in st["tarry"]["notes"]
    assert msg.SKIPPED_LINK.format(name="tarry.tar.gz/ex4.py") in st["tarry"]["notes"]  # a hardlink
    assert msg.READ_AS_CP1252.format(label="ex2.py") in st["badenc"]["notes"]  # a stray byte costs nothing


def test_identity_columns_and_canvas_export(shaped):
    *_, [(out, _), _] = shaped
    rows = list(csv.reader((out / "gradebook.csv").open()))
    assert tuple(rows[0]) == GRADEBOOK_COLUMNS
    by = {r[0]: dict(zip(GRADEBOOK_COLUMNS, r, strict=True)) for r in rows[1:]}
    assert by["20240001@gradescope"]["name"] == "Grace Hopper"
    assert by["20240001@gradescope"]["email"] == "grace@example.edu"
    assert by["carlos@canvas"]["canvas_id"] == "1001"
    assert (by["carlos@canvas"]["late"], by["dana@canvas"]["late"], by["alice"]["late"]) == ("no", "yes", "")
    assert "'=2+5" in by and "=2+5" not in by  # escaped: a spreadsheet shows it, never runs it
    canvas = list(csv.reader((out / "canvas.csv").open()))
    assert tuple(canvas[0][:5]) == CANVAS_COLUMNS and canvas[1][0] == "Points Possible" and canvas[1][5] == "42"
    rows = {r[0]: r for r in canvas[2:]}
    assert rows["carlos@canvas"][1:5] == ["1001", "", "", ""] and rows["carlos@canvas"][5] == "42"
    assert rows["Alan Turing (20240002@gradescope)"][1:4] == ["", "20240002", ""]
    assert rows["王小明@canvas"][1:6] == ["41006", "", "", "", "4"]  # from inside submissions.zip
    assert len(canvas) == 2 + 6  # the four Canvas and two Gradescope students; every folder is unmatched
    assert not any(cell.startswith(("=", "+", "@")) for r in canvas for cell in r)


def test_stale_student_files_are_removed_and_listed(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    shapes._all(subs / "ann")
    shapes._all(subs / "bo")
    grade_batch(subs, out, jobs=1, limits=LIMITS, progress=False, similarity=False)
    (subs / "bo" / "ex1.py").unlink()
    for f in (subs / "bo").iterdir():
        f.unlink()
    (subs / "bo").rmdir()
    summary = grade_batch(subs, out, jobs=1, limits=LIMITS, progress=False, similarity=False, resume=True)
    assert summary["stale_removed"] == ["bo"]
    assert not (out / "students" / "bo.json").exists()
    assert [r[0] for r in csv.reader((out / "gradebook.csv").open())] == ["student", "ann"]


def test_one_student_with_a_folder_and_a_zip_is_one_row_and_one_progress_step(tmp_path, capsys):
    subs = tmp_path / "subs"
    shapes._all(subs / "alice")
    shapes._zip(subs / "alice.zip", {"ex1.py": shapes.BUGGY_EX1})
    summary = grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, similarity=False)
    assert summary["students"] == 1 and summary["score"]["mean"] == shapes.FULL
    assert "grading: 1/1 alice" in capsys.readouterr().err
    assert [s["name"] for s in summary["skipped"]] == ["alice.zip"]


def test_an_empty_class_is_an_error_exit(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "readme.txt").write_text("nothing here")
    res = CliRunner().invoke(main, ["batch", str(subs), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1
    assert EMPTY_CLASS.format(folder=subs) in res.output
    assert "readme.txt" in res.output and msg.NOT_A_SUBMISSION in res.output


# -- units -------------------------------------------------------------------------------------------------------


def test_source_is_decoded_as_python_does():
    text = REFERENCE.joinpath("ex2.py").read_text()
    assert decode_source(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()) == text
    assert decode_source("# coding: latin-1\nx = 'caf\xe9'\n".encode("latin-1")) == "# coding: latin-1\nx = 'caf\xe9'\n"
    with pytest.raises(SyntaxError):
        decode_source(b"\xef\xbb\xbf# coding: latin-1\n")
    with pytest.raises(SyntaxError):  # as python: an undecodable first line is a bad encoding declaration
        decode_source(b"x = '\xff'\n")
    with pytest.raises(UnicodeDecodeError):
        decode_source(b"x = 1\ny = 2\nz = '\xff'\n")


@pytest.mark.parametrize(
    ("name", "exercise"),
    [
        ("ex1.py", "ex1"),
        ("Ex1.py", "ex1"),
        ("EX4.PY", "ex4"),
        ("backprop_ex2.py", "ex2"),
        ("ex3 (1).py", "ex3"),
        ("ex3-1.py", "ex3"),
        ("exercise_4.py", "ex4"),
        ("ex12.py", None),
        ("index1.py", None),
        ("ex1_ex2.py", None),
        ("ex1.ipynb", None),
        ("._ex1.py", None),
        ("ex2fan_1001_2001_ex1.py", "ex1"),
        ("dana_late_1002_2010_Ex4 (2).py", "ex4"),
    ],
)
def test_exercise_file_names(name, exercise):
    assert exercise_of(name) == exercise


def test_a_fifo_is_never_opened_for_reading(tmp_path):
    fifo = tmp_path / "ex1.py"
    os.mkfifo(fifo)
    done = threading.Event()

    def attempt():
        with pytest.raises(Unreadable):
            read_regular(fifo, MAX_SOURCE_BYTES)
        done.set()

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set(), "reading a FIFO blocked"


def test_a_zip_that_lies_about_its_size_is_capped(tmp_path):
    big = b"#" * (MAX_SOURCE_BYTES + 10)
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ex1.py", big)
    raw = bytearray(path.read_bytes())
    # rewrite the declared uncompressed size (local header and central directory) to 10 bytes
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = raw.index(sig)
        raw[at + offset : at + offset + 4] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    sub = read_submission(path)
    assert "ex1" not in sub.sources
    assert "ex1" in sub.problems


def test_a_tar_bomb_stops_at_the_budget(tmp_path):
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for k in range(3):
            info = tarfile.TarInfo(f"blob{k}.bin")
            info.size = 40 << 20
            tf.addfile(info, io.BytesIO(b"\0" * info.size))
        info = tarfile.TarInfo("ex2.py")
        data = REFERENCE.joinpath("ex2.py").read_bytes()
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    sub = read_submission(path)
    assert any("stopped reading" in n for n in sub.notes)
    assert "ex2" not in sub.sources


def test_a_notebook_entry_goes_through_the_notebook_reader(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(REFERENCE.joinpath("ex2.py").read_text())]
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nb, subs / "nina.ipynb")
    entries, skipped = discover(subs)
    assert [e.student for e in entries] == ["nina"] and not skipped
    sub = read_entry(entries[0])
    assert sub.to_dict()["graded_files"] == {"ex2": "nina.ipynb cell 1"}
    assert msg.NOTEBOOK_USED.format(exercise="ex2", label="nina.ipynb cell 1") in sub.notes


def test_the_released_bundle_zipped_whole_is_graded_from_its_filled_notebook(tmp_path):
    """The stubs beside the notebook (the README's Colab steps zip the bundle whole) do not hide the notebook."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(REFERENCE.joinpath("ex2.py").read_text())]
    folder = tmp_path / "subs" / "dave"
    (folder / "exercises").mkdir(parents=True)
    for stub in EXERCISES.glob("ex*.py"):
        (folder / "exercises" / stub.name).write_text(stub.read_text())
    nbformat.write(nb, folder / "backprop_ninja.ipynb")
    sub = read_submission(folder)
    graded = sub.to_dict()["graded_files"]
    assert graded["ex2"] == "backprop_ninja.ipynb cell 1"  # the notebook's work, not the stub
    assert graded["ex1"] == "exercises/ex1.py" and "stub" in sub.flags  # what the notebook lacks: still the stub
    assert msg.STUB_IGNORED.format(exercise="ex2", labels="exercises/ex2.py") in sub.notes
    assert msg.STUB_ONLY.format(exercise="ex1", label="exercises/ex1.py") in sub.notes
    # a stub in all but wording (reformatted, a comment added) is still a stub: it does not hide the notebook
    ex2 = folder / "exercises" / "ex2.py"
    ex2.write_text(
        "# my copy\n" + ex2.read_text().replace("    raise NotImplementedError", "    raise NotImplementedError()")
    )
    assert read_submission(folder).to_dict()["graded_files"]["ex2"] == "backprop_ninja.ipynb cell 1"


def test_gradescope_metadata_that_cannot_be_read_keeps_folder_names(tmp_path):
    shapes._all(tmp_path / "submission_1")
    (tmp_path / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    entries, skipped = discover(tmp_path)
    assert [e.student for e in entries] == ["submission_1@gradescope"]  # its folder name, in Gradescope's namespace
    assert skipped[0].name == "submission_metadata.yml"
    assert skipped[0].reason.startswith(msg.METADATA_UNREADABLE.split("{")[0])


def test_two_gradescope_folders_claiming_one_student_id_are_graded_apart_and_flagged(tmp_path):
    """A student who sets their SID to a classmate's (and sorts first) must not replace the classmate's grade."""
    shapes._all(tmp_path / "submission_1")  # mallory: claims ada's id, and a name that would split into two rows
    shapes._all(tmp_path / "submission_2")  # ada
    meta = (
        "submission_1:\n  :submitters:\n  - :name: 'Mallory; Ada Lovelace'\n    :sid: 'A123'\n    :email: m@x.org\n"
        "submission_2:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: 'A123'\n    :email: ada@x.org\n"
    )
    (tmp_path / "submission_metadata.yml").write_text(meta)
    entries, skipped = discover(tmp_path)
    assert [e.student for e in entries] == ["A123_submission_1@gradescope", "A123_submission_2@gradescope"]
    assert [s.name for s in skipped] == ["submission_metadata.yml"]
    mallory, ada = (read_entry(e) for e in entries)
    assert "duplicate-id" in mallory.flags and "duplicate-id" in ada.flags
    assert msg.DUPLICATE_ID.format(student="A123", others="submission_1") in ada.notes
    assert "sid" not in ada.identity and ada.identity["claimed_sid"] == "A123"
    assert mallory.identity["name"] == "Mallory, Ada Lovelace"  # one member, one Canvas row
    result = {"score": 0, "max_score": 42, "items": [], "identity": mallory.identity}
    rows = list(csv.reader(io.StringIO(canvas_gradebook({"A123_submission_1@gradescope": result}))))
    assert rows[2:] == []  # no id Canvas could match: no row, which Canvas would match by name to Ada
    summary = summarize({"A123_submission_1@gradescope": result})
    assert summary["canvas_unmatched"] == {UNMATCHED_CONTESTED: ["A123_submission_1@gradescope"]}


def test_read_submission_takes_a_folder_or_an_archive(tmp_path):
    shapes._zip(tmp_path / "kim.zip", {"hw/ex3.py": shapes.REF["ex3"], "__MACOSX/hw/._ex3.py": "junk"})
    sub = read_submission(tmp_path / "kim.zip")
    assert sub.name == "kim" and sub.to_dict()["graded_files"] == {"ex3": "kim.zip/hw/ex3.py"}
    assert sub.sources["ex3"].text == shapes.REF["ex3"]
    assert read_submission(REFERENCE).to_dict()["graded_files"] == {ex: f"{ex}.py" for ex in shapes.REF}


def test_a_gradescope_group_gets_a_canvas_row_per_member():
    result = {"score": 40, "max_score": 42, "items": [], "identity": {"name": "Ann; Bo", "sid": "7; 8"}}
    rows = list(csv.reader(io.StringIO(canvas_gradebook({"7@gradescope": result}))))
    assert [(r[0], r[2], r[5]) for r in rows[2:]] == [
        ("Ann (7@gradescope)", "7", "40"),
        ("Bo (7@gradescope)", "8", "40"),
    ]


# ----------------------------------------------------------------------------------------------------------
# names and archives built to break the run (red team): the class still ends with a gradebook


def _reference_files(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for ex in ("ex1", "ex2", "ex3", "ex4"):
        (folder / f"{ex}.py").write_bytes((REFERENCE / f"{ex}.py").read_bytes())
    return folder


def _tar_with(path: Path, members: dict[bytes, bytes]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT, encoding="utf-8") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name.decode("utf-8", "surrogateescape"))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


def test_names_that_are_not_utf8_or_too_long_are_graded_under_safe_ids(tmp_path):
    subs = tmp_path / "subs"
    _reference_files(subs / "alice")
    _reference_files(Path(os.fsdecode(bytes(subs) + b"/mal\xff")))
    _reference_files(Path(os.fsdecode(bytes(subs) + b"/mal\xfe")))
    _reference_files(subs / ("m" * 240))
    files = {f"{ex}.py".encode(): (REFERENCE / f"{ex}.py").read_bytes() for ex in ("ex1", "ex2", "ex3", "ex4")}
    _tar_with(subs / "tarry.tar.gz", {**files, b"ex1_\xff.py": b"x = 1\n"})
    summary = grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, progress=False, similarity=False)
    book = list(csv.DictReader((tmp_path / "out" / "gradebook.csv").open(encoding="utf-8")))
    assert len(book) == 5 == summary["students"] and {r["score"] for r in book} == {"42"}
    ids = [r["student"] for r in book]
    assert all(len(i.encode()) <= 120 and "\ufffd" not in i.replace("mal\ufffd", "") for i in ids)
    assert len({i for i in ids if i.startswith("mal\ufffd-")}) == 2  # two such names stay two students
    assert (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_canvas_namesakes_keep_their_own_grades(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for ex in ("ex1", "ex2", "ex3", "ex4"):
        (subs / f"smithjohn_222_5002_{ex}.py").write_bytes((REFERENCE / f"{ex}.py").read_bytes())
    (subs / "smithjohn_111_5001_readme.txt").write_text("nothing here\n")
    grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, progress=False, similarity=False)
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "out" / "gradebook.csv").open())}
    assert {k: (r["canvas_id"], r["score"]) for k, r in rows.items()} == {
        "smithjohn_111@canvas": ("111", "0"),
        "smithjohn_222@canvas": ("222", "42"),
    }


def test_a_tar_header_that_declares_gigabytes_is_refused_before_it_is_read(tmp_path):
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, 256 << 20  # read whole by tarfile, whatever members it precedes
    path = tmp_path / "bomb.tar.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(pax.tobuf(format=tarfile.USTAR_FORMAT))
        zeros = bytes(1 << 20)
        for _ in range(pax.size >> 20):
            f.write(zeros)
    sub = read_submission(path)
    assert not sub.sources and any("unpacks to more than 64 MiB" in n for n in sub.notes), sub.notes


def test_a_zip_member_compressed_with_bzip2_is_skipped_not_inflated(tmp_path):
    path = tmp_path / "bz.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for ex in ("ex1", "ex2", "ex3"):
            zf.writestr(f"{ex}.py", (REFERENCE / f"{ex}.py").read_text(), compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("ex4.py", (REFERENCE / "ex4.py").read_text(), compress_type=zipfile.ZIP_BZIP2)
    sub = read_submission(path)
    assert sorted(sub.sources) == ["ex1", "ex2", "ex3"]
    assert msg.SKIPPED_COMPRESSION.format(name="bz.zip/ex4.py") in sub.notes


def test_metadata_with_yaml_aliases_is_refused_and_folders_are_graded_by_name(tmp_path):
    subs = tmp_path / "subs"
    _reference_files(subs / "submission_1")
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{k}: &a{k} [*a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}]\n" for k in range(1, 9)
    )
    (subs / "submission_metadata.yml").write_text(bomb + "submission_1:\n  :submitters:\n  - :name: *a8\n")
    entries, skipped = discover(subs)
    assert [e.student for e in entries] == ["submission_1@gradescope"]
    assert any("aliases" in s.reason for s in skipped)


def test_a_digest_helper_that_dies_costs_no_gradebook(tmp_path, monkeypatch):
    from grader.classroom import pool

    killed = []

    class Killed(pool.Background):  # similarity is off: the first helper is the one that digests the whole class
        def result(self, timeout=900.0):  # ... killed, say by the OOM killer
            if killed:  # the one that writes report.html, once every student is graded
                return super().result(timeout)
            self.kill()
            killed.append(self)
            raise RuntimeError("a helper process failed: its grading process was killed by SIGKILL")

    monkeypatch.setattr(pool, "Background", Killed)
    subs = tmp_path / "subs"
    _reference_files(subs / "ada")
    summary = grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, progress=False, similarity=False)
    assert summary["students"] == 1 and summary["score"]["mean"] == 42
    assert len(killed) == 1


def test_a_zip_listing_more_entries_than_the_limit_is_refused_before_it_is_listed(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # 70,000 entries: past 65,535, so the count sits in the zip64 record
        for k in range(70_000):
            zf.writestr(str(k), b"")
    path = tmp_path / "listing.zip"
    path.write_bytes(buf.getvalue())
    sub = read_submission(path)
    assert any("it lists 70000 entries, more than 10000" in n for n in sub.notes), sub.notes


def test_two_notebooks_that_give_an_exercise_differently_are_flagged_ambiguous(tmp_path):
    """A scratch `Untitled.ipynb` beside the homework: the notebook giving more exercises wins, and it is flagged."""
    nbformat = pytest.importorskip("nbformat")

    def write(name, *exercises, extra=""):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(REFERENCE.joinpath(f"{ex}.py").read_text() + extra) for ex in exercises]
        nbformat.write(nb, folder / name)

    folder = tmp_path / "alice"
    folder.mkdir()
    scratch = "\n\ndef dlogits(logits, Yb, n):\n    return logits * 0\n"
    write("Untitled.ipynb", "ex2", extra=scratch)  # sorts first, gives one exercise, differently
    write("makemore_part4_backprop.ipynb", "ex2", "ex3")
    stub = nbformat.v4.new_notebook()  # the stub files pasted into cells: gives every exercise, holds no work
    stub.cells = [nbformat.v4.new_code_cell(p.read_text()) for p in sorted(EXERCISES.glob("ex*.py"))]
    nbformat.write(stub, folder / "Aaa.ipynb")
    sub = read_submission(folder)
    graded = sub.to_dict()["graded_files"]
    assert (graded["ex2"], graded["ex3"]) == (
        "makemore_part4_backprop.ipynb cell 1",
        "makemore_part4_backprop.ipynb cell 2",
    )
    assert graded["ex1"].startswith("Aaa.ipynb")  # what only the stubs give is still graded, as not attempted
    assert "ambiguous" in sub.flags
    assert any(n.startswith("ex2: AMBIGUOUS, 2 different notebooks") and "Untitled.ipynb" in n for n in sub.notes)


def test_a_made_up_id_or_a_group_cannot_push_a_classmate_out_or_take_their_sid(tmp_path):
    """An id equal to a renamed one (`123_submission_1`), or a classmate's id as a second group member."""
    for k in (1, 2, 3, 4):
        shapes._all(tmp_path / f"submission_{k}")

    def person(name, sid):
        return f"  - :name: {name}\n    :sid: '{sid}'\n"

    meta = (
        f"submission_1:\n  :submitters:\n{person('Victim', '123')}"
        f"submission_2:\n  :submitters:\n{person('A', '123')}"
        f"submission_3:\n  :submitters:\n{person('B', '123_submission_1')}"
        f"submission_4:\n  :submitters:\n{person('C', '999')}{person('Other', '456')}"
    )
    (tmp_path / "submission_metadata.yml").write_text(meta)
    shapes._all(tmp_path / "solo")  # not in the metadata: its own row
    entries, skipped = discover(tmp_path)
    assert len({e.student for e in entries}) == len(entries) == 5  # nobody merged or skipped
    assert [s.name for s in skipped] == ["submission_metadata.yml"]
    by_folder = {e.path.name: dict(e.identity) for e in entries}
    assert by_folder["submission_1"].get("claimed_sid") == "123" and "sid" not in by_folder["submission_1"]
    assert by_folder["submission_4"]["sid"] == "999; 456"  # no shared member: untouched

    (tmp_path / "submission_metadata.yml").write_text(
        meta.replace(person("Other", "456"), person("Victim", "123"))
        + f"submission_5:\n  :submitters:\n{person('D', '7')}"
    )
    shapes._all(tmp_path / "submission_5")
    entries, _ = discover(tmp_path)
    group = next(dict(e.identity) for e in entries if e.path.name == "submission_4")
    assert group["sid"] == "999; " and group["claimed_sid"] == "123"  # the classmate's id, taken out of the group


def test_everyday_layouts_grade_the_work_not_a_backup_or_a_name(tmp_path):
    """ex01.py names, an older backup shallower than the work, a copy without its last newline, a cp1252 comment."""
    ref = {ex: REFERENCE.joinpath(f"{ex}.py").read_text() for ex in ("ex1", "ex2")}
    padded = tmp_path / "padded"
    for k, ex in ((1, "ex1"), (2, "ex2")):
        (padded).mkdir(exist_ok=True)
        (padded / f"ex0{k}.py").write_text(ref[ex])
    assert read_submission(padded).to_dict()["graded_files"] == {"ex1": "ex01.py", "ex2": "ex02.py"}

    work = tmp_path / "work"
    (work / "project" / "exercises").mkdir(parents=True)
    (work / "backup").mkdir()
    (work / "project" / "exercises" / "ex1.py").write_text(ref["ex1"])
    older = ref["ex1"].rsplit("def dC", 1)[0] + "def dC(C, Xb, demb):\n    raise NotImplementedError\n"
    (work / "backup" / "ex1.py").write_text(older)  # shallower, one function short
    (work / "old").mkdir()
    (work / "old" / "ex2.py").write_text(ref["ex2"].rstrip("\n"))  # the same file without its last newline
    (work / "project" / "exercises" / "ex2.py").write_text(ref["ex2"])
    sub = read_submission(work)
    assert sub.to_dict()["graded_files"]["ex1"] == "project/exercises/ex1.py"  # the most complete
    assert not any(n.startswith("ex2: AMBIGUOUS") for n in sub.notes)

    windows = tmp_path / "windows"
    windows.mkdir()
    (windows / "ex2.py").write_bytes(b"# it\x92s done\n" + ref["ex2"].encode())
    sub = read_submission(windows)
    assert sub.to_dict()["graded_files"] == {"ex2": "ex2.py"} and "unreadable" not in sub.flags
    assert msg.READ_AS_CP1252.format(label="ex2.py") in sub.notes


def _zip_without_utf8_flag(path: Path, names: dict[str, bool]) -> Path:
    """Write a class zip as `zip` on Linux or an old archiver does: UTF-8 names without the UTF-8 flag, each with
    Info-ZIP's Unicode Path extra field or not ({student: with the field})."""
    import struct
    import zlib

    buf = io.BytesIO()
    swaps = []
    with zipfile.ZipFile(buf, "w") as zf:
        for k, (student, with_field) in enumerate(names.items()):
            for ex in ("ex1", "ex2", "ex3", "ex4"):
                raw = f"{student}/{ex}.py".encode()
                stand_in = f"{k}".encode().ljust(len(raw) - 7, b"_") + f"/{ex}.py".encode()  # ASCII, same length
                info = zipfile.ZipInfo(stand_in.decode())
                if with_field:
                    body = b"\x01" + struct.pack("<I", zlib.crc32(raw)) + raw
                    info.extra = struct.pack("<HH", 0x7075, len(body)) + body
                zf.writestr(info, (REFERENCE / f"{ex}.py").read_bytes())
                swaps.append((stand_in, raw))
    data = buf.getvalue()
    for stand_in, raw in swaps:  # the stored name bytes, in the local header and the central directory
        assert data.count(stand_in) == 2
        data = data.replace(stand_in, raw)
    path.write_bytes(data)
    return path


def test_a_zip_whose_utf8_names_lack_the_flag_keeps_the_students_names(tmp_path):
    """zipfile reads such names as cp437 (`Zoë` as `Zo├½`): the Unicode Path field, or the bytes' own UTF-8, win."""
    path = _zip_without_utf8_flag(tmp_path / "class.zip", {"Zoë Ångström": True, "李雷": False, "plain": False})
    entries, skipped = discover(path)
    assert sorted(e.student for e in entries) == sorted(["Zoë Ångström", "李雷", "plain"]), skipped
    assert all(len(read_entry(e).sources) == 4 for e in entries)
