"""Canvas and Gradescope downloads as those systems write them: whose key is whose, names in any script, a whole
download (a folder or a zip, or the zip given as the class), lateness, and a canvas.csv Canvas's import accepts.

The shapes follow the systems' own code and documentation: Canvas's bulk download (canvas-lms ContentZipper)
names each file `sortable name, lower-cased, non-word characters removed` + `_LATE` if late + `_userid_fileid_`
+ the student's file name (`anon_<id>` instead of the name and user id under anonymous grading; older Canvas
wrote `late`); Gradescope's "Export Submissions" zip holds `assignment_<id>_export/` with `submission_metadata.yml`
(`:submitters` with `:name`, `:sid`, `:email`, and `:created_at`) and a `submission_<id>/` folder per submission.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.classroom.batch import grade_batch
from grader.classroom.reports.tables import (
    CANVAS_COLUMNS,
    GRADEBOOK_COLUMNS,
    UNMATCHED_ANONYMOUS,
    UNMATCHED_LOCAL,
    canvas_gradebook,
)
from grader.cli.main import main
from grader.sandbox import Limits
from grader.submissions.intake import discover, read_entry
from grader.submissions.intake import messages as msg
from grader.submissions.intake.finding import ID_COLLISION
from grader.submissions.intake.gather import canvas_file, exercise_of
from tests import shapes

LIMITS = Limits(timeout=2.0, memory_mb=1024)
REF, POINTS, FULL = shapes.REF, shapes.POINTS, shapes.FULL
ASSIGNMENT = "Backprop ninja (12345)"
JOSE_NFD = unicodedata.normalize("NFD", "josé")  # as a zip unpacked on macOS names it: e + U+0301

# one Canvas class: names in four scripts, late as Canvas writes it today (LATE) and as it once did (late), an
# NFD name, and an anonymous submission
CANVAS_CLASS = {
    "müllerjürgen_41004_880404_ex1.py": REF["ex1"],
    "müllerjürgen_41004_880405_ex2.py": REF["ex2"],
    "иванова_LATE_41005_880406_ex1.py": REF["ex1"],
    "王小明_late_41006_880407_ex3.py": REF["ex3"],
    f"{JOSE_NFD}_41007_880408_ex4.py": REF["ex4"],
    "LATE_anon_Xy1Zq_880409_ex2.py": REF["ex2"],
}
CANVAS_SCORES = {
    "müllerjürgen@canvas": POINTS["ex1"] + POINTS["ex2"],
    "иванова@canvas": POINTS["ex1"],
    "王小明@canvas": POINTS["ex3"],
    "josé@canvas": POINTS["ex4"],  # NFC: one student however the name's bytes were written
    "anon_Xy1Zq@canvas": POINTS["ex2"],
}
CANVAS_LATE = {
    "müllerjürgen@canvas": False,
    "иванова@canvas": True,
    "王小明@canvas": True,
    "josé@canvas": False,
    "anon_Xy1Zq@canvas": True,
}
CANVAS_IDS = {
    "müllerjürgen@canvas": "41004",
    "иванова@canvas": "41005",
    "王小明@canvas": "41006",
    "josé@canvas": "41007",
}


def _gradescope_metadata(*submissions: tuple[str, str, str, str]) -> str:
    """submission_metadata.yml as Gradescope's export writes it: Ruby symbol keys, a Ruby BigDecimal score."""
    out = ""
    for folder, name, sid, when in submissions:
        out += (
            f"{folder}:\n  :submitters:\n  - :name: {name}\n    :sid: '{sid}'\n    :email: {sid}@uni.example\n"
            f"  :created_at: {when}\n  :score: !ruby/object:BigDecimal 18:0.0\n  :status: processed\n"
            "  :results:\n    score: 0.0\n  :history: []\n"
        )
    return out


def _students(out: Path) -> dict[str, dict]:
    return {f.name[: -len(".json")]: json.loads(f.read_text()) for f in (out / "students").glob("*.json")}


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open(encoding="utf-8")))


# -- 1. identities from different sources never collide -------------------------------------------------------


def test_a_gradescope_sid_equal_to_a_canvas_name_replaces_nobody(tmp_path):
    """Canvas's ada, a Gradescope submitter claiming the sid `ada`, and a folder `ada`: three students, each
    graded from their own files, each flagged id-collision; neither id takes the other's row or grade."""
    subs = tmp_path / "subs"
    for k, ex in enumerate(REF):  # Canvas: ada's whole solution
        shapes._write(subs / f"ada_1001_{5001 + k}_{ex}.py", REF[ex])
    shapes._write(subs / "submission_metadata.yml", _gradescope_metadata(("submission_9001", "M", "ada", "x")))
    shapes._write(subs / "submission_9001" / "ex2.py", REF["ex2"])  # the claimant's own work: ex2 only
    shapes._write(subs / "ada" / "ex3.py", REF["ex3"])  # a folder named ada: ex3 only

    entries, skipped = discover(subs)
    assert [(e.student, e.source) for e in entries] == [
        ("ada", "local"),
        ("ada@canvas", "canvas"),
        ("ada@gradescope", "gradescope"),
    ]
    assert all(ID_COLLISION in e.flags for e in entries)
    assert [s.name for s in skipped] == ["submission_metadata.yml"]  # nobody skipped as "the same student"

    summary = grade_batch(subs, tmp_path / "out", jobs=1, limits=LIMITS, progress=False, similarity=False)
    st = _students(tmp_path / "out")
    assert {s: r["score"] for s, r in st.items()} == {
        "ada": POINTS["ex3"],
        "ada@canvas": FULL,
        "ada@gradescope": POINTS["ex2"],
    }
    assert st["ada@canvas"]["graded_files"]["ex1"] == "ada_1001_5001_ex1.py"
    assert st["ada@gradescope"]["graded_files"] == {"ex2": "ex2.py"}
    note = msg.ID_COLLISION.format(id="ada", others="ada, ada@gradescope")
    assert note in st["ada@canvas"]["notes"]
    assert summary["intake_flags"][ID_COLLISION] == ["ada", "ada@canvas", "ada@gradescope"]
    canvas = {r[0]: r for r in _rows(tmp_path / "out" / "canvas.csv")[2:]}
    assert canvas["ada@canvas"][1:6] == ["1001", "", "", "", "42"]  # Canvas's ada gets Canvas's ada's grade
    assert canvas["M (ada@gradescope)"][1:6] == ["", "ada", "", "", "2"]
    assert summary["canvas_unmatched"] == {UNMATCHED_LOCAL: ["ada"]}


def test_a_folder_named_like_a_namespaced_key_stays_its_own(tmp_path):
    shapes._write(tmp_path / "ada@canvas" / "ex1.py", REF["ex1"])
    shapes._write(tmp_path / "ada_1001_5001_ex1.py", REF["ex1"])
    shapes._write(tmp_path / "x@local" / "ex1.py", REF["ex1"])
    shapes._write(tmp_path / "x" / "ex1.py", REF["ex1"])
    entries, skipped = discover(tmp_path)
    assert [e.student for e in entries] == ["ada@canvas", "ada@canvas@local", "x", "x@local@local"]
    assert not skipped


# -- 2. Canvas names in any script ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "login", "late", "uid", "file"),
    [
        ("müllerjürgen_41004_880404_ex1.py", "müllerjürgen", "", "41004", "ex1.py"),
        ("müllerjürgen_late_41004_880404_ex1.py", "müllerjürgen", "1", "41004", "ex1.py"),
        ("müllerjürgen_LATE_41004_880404_ex1 (2).py", "müllerjürgen", "1", "41004", "ex1 (2).py"),
        ("иванова_41005_880406_ex1.py", "иванова", "", "41005", "ex1.py"),
        ("王小明_LATE_41006_880407_ex3.py", "王小明", "1", "41006", "ex3.py"),
        (f"{JOSE_NFD}_41007_880408_ex4.py", "josé", "", "41007", "ex4.py"),  # NFD in, NFC out
        ("obrien2_41008_880410_hw_3_4_ex1.py", "obrien2", "", "41008", "hw_3_4_ex1.py"),
        ("dana_late_1002_2010_ex1.py", "dana", "1", "1002", "ex1.py"),
        ("LATE_anon_Xy1Zq_880409_ex2.py", "", "1", "", "ex2.py"),
    ],
)
def test_canvas_file_names_in_any_script(name, login, late, uid, file):
    parts = canvas_file(name)
    assert parts is not None and (parts["login"], parts["late"], parts["uid"], parts["file"]) == (
        login,
        late,
        uid,
        file,
    )
    assert exercise_of(name) == exercise_of(file)


@pytest.mark.parametrize("name", ["my notes_1_2_x.py", "a/b_1_2_x.py", "ex1.py", "ada_x_2_ex1.py", "ada_1_ex1.py"])
def test_names_canvas_never_writes_are_not_canvas_files(name):
    assert canvas_file(name) is None


def test_loose_canvas_files_in_any_script_are_graded_with_their_lateness(tmp_path):
    for name, text in CANVAS_CLASS.items():
        shapes._write(tmp_path / name, text)
    entries, skipped = discover(tmp_path)
    assert not skipped  # none is "not a Canvas bulk-download file" any more
    assert {e.student: e.late for e in entries} == CANVAS_LATE
    assert {e.student: dict(e.identity).get("canvas_id") for e in entries} == {**CANVAS_IDS, "anon_Xy1Zq@canvas": None}
    graded = {e.student: read_entry(e).to_dict() for e in entries}
    assert graded["josé@canvas"]["graded_files"] == {"ex4": f"{JOSE_NFD}_41007_880408_ex4.py"}
    assert graded["иванова@canvas"]["late"] is True and msg.CANVAS_LATE in graded["иванова@canvas"]["notes"]
    assert graded["müllerjürgen@canvas"]["late"] is False


# -- 3. a whole download: a folder or a zip, or the zip as the class ---------------------------------------------


def _canvas_zip(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in CANVAS_CLASS.items():
            zf.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def canvas_runs(tmp_path_factory):
    """Canvas's submissions.zip alone in a folder, graded; and the same zip given as the class, through the CLI."""
    root = tmp_path_factory.mktemp("canvas")
    subs = root / "subs"
    archive = _canvas_zip(subs / "submissions.zip")
    shapes._write(subs / ".DS_Store", b"\0")
    out1, out2 = root / "out1", root / "out2"
    summary = grade_batch(
        subs, out1, jobs=1, limits=LIMITS, progress=False, similarity=False, canvas_assignment=ASSIGNMENT
    )
    args = ["batch", str(archive), "--out", str(out2), "--jobs", "1", "--timeout", "2", "--memory", "1024"]
    cli = CliRunner().invoke(main, [*args, "--no-similarity", "--canvas-assignment", ASSIGNMENT])
    return subs, (out1, summary), (out2, cli)


def test_a_folder_holding_submissions_zip_is_graded_as_the_class_inside(canvas_runs):
    _, (out, summary), _ = canvas_runs
    st = _students(out)
    assert {s: r["score"] for s, r in st.items()} == CANVAS_SCORES
    assert {s: r["late"] for s, r in st.items()} == CANVAS_LATE
    assert summary["late"] == dict(sorted(CANVAS_LATE.items()))
    opened = msg.DOWNLOAD_OPENED.format(what=msg.CANVAS_DOWNLOAD)
    assert {s["name"]: s["reason"] for s in summary["skipped"]} == {".DS_Store": msg.HIDDEN, "submissions.zip": opened}
    assert st["王小明@canvas"]["graded_files"] == {"ex3": "王小明_late_41006_880407_ex3.py"}


def test_the_zip_given_as_the_class_is_graded_the_same(canvas_runs):
    _, (out1, _), (out2, cli) = canvas_runs
    assert cli.exit_code == 0, cli.output
    for name in ("gradebook.csv", "canvas.csv", *(f"students/{s}.json" for s in CANVAS_SCORES)):
        assert (out1 / name).read_bytes() == (out2 / name).read_bytes(), name
    assert json.loads((out2 / "summary.json").read_text())["skipped"] == []  # the argument is the class itself


def test_the_unzipped_download_folder_is_the_same_class(canvas_runs, tmp_path):
    subs, _, _ = canvas_runs
    zipped = discover(subs)[0]
    with zipfile.ZipFile(subs / "submissions.zip") as zf:
        zf.extractall(tmp_path / "subs" / "submissions")
    unzipped, skipped = discover(tmp_path / "subs")
    assert [(e.student, e.identity, e.late) for e in unzipped] == [(e.student, e.identity, e.late) for e in zipped]
    assert [read_entry(e).to_dict() for e in unzipped] == [read_entry(e).to_dict() for e in zipped]
    assert [s.name for s in skipped] == ["submissions"]


def test_canvas_csv_is_what_canvas_imports(canvas_runs):
    _, (out, summary), _ = canvas_runs
    rows = _rows(out / "canvas.csv")
    assert rows[0] == [*CANVAS_COLUMNS, ASSIGNMENT] and tuple(CANVAS_COLUMNS) == (
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
    )
    assert rows[1] == ["Points Possible", "", "", "", "", "42"]
    body = {r[0]: r[1:] for r in rows[2:]}
    # the Canvas user id from the download's file names in ID; SIS Login ID empty (the name is no login)
    assert body == {s: [uid, "", "", "", str(CANVAS_SCORES[s])] for s, uid in CANVAS_IDS.items()}
    assert summary["canvas_unmatched"] == {UNMATCHED_ANONYMOUS: ["anon_Xy1Zq@canvas"]}
    book = _rows(out / "gradebook.csv")
    assert tuple(book[0]) == GRADEBOOK_COLUMNS and "late" in GRADEBOOK_COLUMNS
    late = {r[0]: r[GRADEBOOK_COLUMNS.index("late")] for r in book[1:]}
    assert late == {s: "yes" if v else "no" for s, v in CANVAS_LATE.items()}


def test_no_canvas_row_for_a_student_canvas_could_only_match_by_name():
    result = {"score": 42, "max_score": 42, "items": []}
    students = {
        "ada": result,  # a folder: no id
        "Points Possible@gradescope": {**result, "identity": {"name": "Points Possible", "sid": "Points Possible"}},
    }
    rows = list(csv.reader(io.StringIO(canvas_gradebook(students))))
    assert [r[0] for r in rows] == ["Student", "Points Possible", "Points_Possible (Points_Possible@gradescope)"]


GRADESCOPE = _gradescope_metadata(
    ("submission_301", "Grace Hopper", "20240001", "2026-11-01 10:00:00.000000000 -07:00"),
    ("submission_302", "Alan Turing", "20240002", "2026-04-26 17:34:00.861687000 Z"),
)


def _gradescope_export(folder: Path) -> Path:
    export = folder / "assignment_4242_export"
    shapes._write(export / "submission_metadata.yml", GRADESCOPE)
    shapes._all(export / "submission_301")
    shapes._write(export / "submission_302" / "hw" / "ex2.py", REF["ex2"])
    shapes._write(export / ".DS_Store", b"\0")
    return export


def test_a_gradescope_export_folder_or_its_zip_is_the_class(tmp_path):
    export = _gradescope_export(tmp_path / "subs")
    entries, skipped = discover(tmp_path / "subs")
    assert [e.student for e in entries] == ["20240001@gradescope", "20240002@gradescope"]
    assert [e.submitted_at for e in entries] == ["2026-11-01T10:00:00-07:00", "2026-04-26T17:34:00.861687+00:00"]
    assert {s.name: s.reason for s in skipped} == {
        "assignment_4242_export": msg.DOWNLOAD_OPENED.format(what=msg.GRADESCOPE_EXPORT),
        "assignment_4242_export/.DS_Store": msg.HIDDEN,
        "assignment_4242_export/submission_metadata.yml": msg.METADATA_USED,
    }
    folder_results = [read_entry(e).to_dict() for e in entries]
    assert folder_results[1]["graded_files"] == {"ex2": "hw/ex2.py"}
    assert "late" not in folder_results[0]  # Gradescope's export carries no due date: lateness unknown
    assert folder_results[0]["submitted_at"] == "2026-11-01T10:00:00-07:00"

    archive = tmp_path / "download" / "submissions.zip"  # what Gradescope's Export Submissions downloads
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(export.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(export.parent).as_posix())
    for where in (archive, archive.parent):  # the zip as the class, or a folder holding it
        zipped, skipped = discover(where)
        assert [(e.student, e.identity, e.submitted_at) for e in zipped] == [
            (e.student, e.identity, e.submitted_at) for e in entries
        ]
        assert [read_entry(e).to_dict() for e in zipped] == folder_results
        prefix = "" if where == archive else "submissions.zip/"
        assert f"{prefix}assignment_4242_export/submission_metadata.yml" in {s.name for s in skipped}


def test_a_students_own_zip_beside_classmates_is_never_opened_as_a_class(tmp_path):
    """A student's zip of Canvas-named files, with a classmate's user id, stays one student's archive."""
    shapes._zip(tmp_path / "mallory.zip", {"ada_1001_5001_ex1.py": REF["ex1"]})
    shapes._all(tmp_path / "bob")
    entries, skipped = discover(tmp_path)
    assert [(e.student, e.kind) for e in entries] == [("bob", "folder"), ("mallory", "archive")]
    assert not skipped


def test_the_skipped_list_says_why_for_a_class_zip(tmp_path):
    archive = tmp_path / "submissions.zip"
    shapes._zip(
        archive,
        {
            **{name: text for name, text in CANVAS_CLASS.items() if "ex1" in name},
            "../escape_1_2_ex1.py": REF["ex1"],
            "__MACOSX/._müllerjürgen_41004_880404_ex1.py": "junk",
            ".hidden": "x",
            "grading notes.txt": "x",
            "ex2.py": REF["ex2"],
        },
        symlinks={"link_1_2_ex3.py": "/etc/passwd"},
    )
    entries, skipped = discover(archive)
    assert [e.student for e in entries] == ["müllerjürgen@canvas", "иванова@canvas"]
    assert {s.name: s.reason for s in skipped} == {
        "../escape_1_2_ex1.py": msg.UNSAFE_MEMBER.format(archive="submissions.zip"),
        "__MACOSX": msg.SYSTEM_FOLDER,
        ".hidden": msg.HIDDEN,
        "grading notes.txt": msg.NOT_A_SUBMISSION,
        "ex2.py": msg.LOOSE_FILE,
        "link_1_2_ex3.py": msg.TOP_SYMLINK,
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("class.tar.gz", msg.CLASS_NOT_ZIP),
        ("notes.txt", msg.CLASS_NOT_FOLDER),
        ("fake.zip", msg.CLASS_ARCHIVE_UNREADABLE.format(name="fake.zip", error="File is not a zip file")),
    ],
)
def test_a_class_given_as_a_file_that_is_no_zip_is_refused_with_why(tmp_path, name, reason):
    (tmp_path / name).write_text("not a zip")
    res = CliRunner().invoke(main, ["batch", str(tmp_path / name), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1 and reason in res.output, res.output


def test_a_zip_of_the_class_folder_is_the_class(tmp_path):
    """`zip -r class.zip class/`: the one folder it holds is the class; its students are graded from inside it."""
    archive = tmp_path / "class.zip"
    shapes._zip(
        archive,
        {
            **{f"class/alice/{ex}.py": text for ex, text in REF.items()},
            "class/bob.zip": _zip_bytes({"ex2.py": REF["ex2"]}),
            "__MACOSX/class/._alice": "junk",
        },
    )
    entries, skipped = discover(archive)
    assert [(e.student, e.kind, e.members) for e in entries] == [
        ("alice", "folder", ("class/alice/",)),
        ("bob", "archive", ("class/bob.zip",)),
    ]
    assert {s.name: s.reason for s in skipped} == {"__MACOSX": msg.SYSTEM_FOLDER, "class": msg.CLASS_FOLDER}
    assert read_entry(entries[0]).to_dict()["graded_files"] == {ex: f"{ex}.py" for ex in REF}
    assert read_entry(entries[1]).to_dict()["graded_files"] == {"ex2": "bob.zip/ex2.py"}


def _zip_bytes(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return buf.getvalue()
