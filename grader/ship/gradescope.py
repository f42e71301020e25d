"""Gradescope glue: turn a grading result into results.json, grade /autograder, and build the autograder zip.

Gradescope's contract (https://gradescope-autograders.readthedocs.io/en/latest/specs/): the uploaded zip
holds `setup.sh` (run once, as root, while the image is built) and `run_autograder` (run once per submission,
working directory /autograder). The student's files are in /autograder/submission and the autograder must
write /autograder/results/results.json; its stdout goes to results/stdout, seen by instructors only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import stat
import time
import traceback
import zipfile
from dataclasses import replace
from pathlib import Path

from grader.classroom import deadline
from grader.ship.release import TORCH_VERSION
from grader.spec.policy import (
    FILENAME,
    VISIBILITIES,
    LateRule,
    Policy,
    PolicyError,
    apply_late,
    grade_kwargs,
    load,
    parse_time,
)

EXERCISES = ("ex1", "ex2", "ex3", "ex4")
VERDICTS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "error": "ERROR",
    "timeout": "TIMED OUT",
    "not_attempted": "NOT ATTEMPTED",
}
# Folders an upload may carry that never hold the student's own exercise files.
_SKIP_DIRS = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints", "node_modules", ".venv", "venv"}
_MAX_ZIP_MEMBERS = 10_000
_MAX_ZIP_BYTES = 64 << 20
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)

SETUP_SH = """#!/usr/bin/env bash
# Build the Gradescope image (runs once, as root): Python 3 + pip, the torch the grader is tested with, the grader.
set -euxo pipefail
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends python3 python3-pip python3-venv
fi
# libseccomp: the sandbox's system-call allow-list, a minimum wall (without it run_autograder refuses to grade)
if ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update && apt-get install -y --no-install-recommends libseccomp2 || true
fi
# Newer Ubuntu images mark the system Python as externally managed (PEP 668); this image is ours to change.
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install --upgrade pip || true
# The CPU-only wheel (no CUDA libraries to download); where that index has no wheel for this Python or
# platform, the same version from the default index.
python3 -m pip install --index-url https://download.pytorch.org/whl/cpu "torch==__TORCH__" \\
    || python3 -m pip install "torch==__TORCH__"
python3 -m pip install "$SOURCE"
python3 -c "import torch, grader.ship.gradescope; print('torch', torch.__version__, 'grader ok')"
python3 -c "from grader.sandbox import syscalls; print(syscalls.missing() or 'libseccomp ok')"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Grade one submission (Gradescope runs this for every upload): writes $ROOT/results/results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="${AUTOGRADER_SOURCE:-$ROOT/source}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
"${PYTHON:-python3}" -m grader.ship.gradescope --root "$ROOT" --course "$SOURCE/course.toml" __UNSAFE__
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # The grader could not even start: still hand Gradescope a valid result the student can read.
    printf '{"score": 0, "output": "The autograder failed to start (exit status %s). Please tell the course \
staff; this is not a problem with your code.", "visibility": "__VISIBILITY__", "tests": []}\\n' \\
        "$status" > "$ROOT/results/results.json"
fi
exit 0
"""

STUB_README = "# backprop-ninja grader\n\nGrades hand-derived backpropagation against autograd.\n"
METADATA = "submission_metadata.json"  # Gradescope's, beside submission/: created_at, assignment.due_date, users
_MAX_METADATA_BYTES = 16 << 20  # it holds every previous submission's results too


def _check_visibility(visibility: str) -> str:
    """Return visibility if Gradescope knows it, else raise ValueError."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    return visibility


def _num(x) -> int | float:
    """Return x as a JSON-safe number (0 for missing or non-finite values)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return 0
    if not math.isfinite(x):
        return 0
    return int(x) if x.is_integer() else round(x, 6)


def _yes_no(value) -> str:
    """Render an exact/approx flag."""
    return "n/a" if value is None else ("yes" if value else "no")


def _item_output(item: dict) -> str:
    """Write the text a student reads for one graded item: verdict, numbers, traps, message."""
    status = str(item.get("status", "error"))
    verdict = VERDICTS.get(status, status.upper())
    lines = [f"{verdict}: {item.get('id', '?')}  ({_num(item.get('score'))}/{_num(item.get('max_score'))})"]
    if status in ("passed", "failed"):
        maxdiff = item.get("maxdiff")
        diff = "n/a" if maxdiff is None else f"{float(maxdiff):.3e}"
        exact, approx = _yes_no(item.get("exact")), _yes_no(item.get("approx"))
        lines.append(f"exact: {exact}  approx: {approx}  maxdiff: {diff}")
    expected = item.get("expected_shape")
    shape = item.get("shape")
    if shape is not None and expected is not None and list(shape) != list(expected):
        lines.append(f"shape: {list(shape)} but expected {list(expected)}")
    elif expected is not None:
        lines.append(f"expected shape: {list(expected)}")
    traps = [str(t) for t in item.get("traps") or []]
    if traps:
        lines.append("traps: " + ", ".join(traps))
    message = str(item.get("message") or "").strip()
    if message:
        lines.append(message)
    return "\n".join(lines)


HIDDEN_TRAP = "hardcoded-size"  # the one finding that comes from the hidden geometry


def _hidden(item: dict) -> tuple[str | None, str]:
    """Return (the hidden geometry's verdict or None when it was not reached, what it said)."""
    info = item.get("hidden_geometry")
    if isinstance(info, dict):
        return info.get("status"), str(info.get("message") or "")
    if item.get("status") == "passed":
        return "passed", ""
    if HIDDEN_TRAP in (item.get("traps") or []):
        return "failed", str(item.get("message") or "")
    return None, ""


def _lecture_view(item: dict) -> dict:
    """Return the item as seen on the lecture geometry alone: no verdict, trap or words from the hidden one."""
    hidden, said = _hidden(item)
    if hidden != "failed":
        return item
    from grader.grading.traps import TRAPS

    traps = [t for t in item.get("traps") or [] if t != HIDDEN_TRAP]
    message = str(item.get("message") or "")
    message = " ".join(message.replace(said, "").split()) if said else message
    failing = [t for t in traps if t not in TRAPS or TRAPS[t].fails]  # e.g. mutates-input fails on its own
    return {**item, "status": "failed" if failing else "passed", "traps": traps, "message": message}


def _summary(result: dict, *, scores: bool) -> str:
    """Write the submission-level text: per exercise, what passes on the lecture geometry (and the score)."""
    items = result.get("items") or []
    lines = []
    if scores:
        lines.append(f"Score: {_num(result.get('score'))} / {_num(result.get('max_score'))}")
    for ex in dict.fromkeys([str(i.get("exercise", "?")) for i in items]):
        mine = [_lecture_view(i) for i in items if str(i.get("exercise", "?")) == ex]
        counts: dict[str, int] = {}
        for i in mine:
            counts[str(i.get("status"))] = counts.get(str(i.get("status")), 0) + 1
        detail = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items()))
        line = f"{ex} on the lecture's sizes: {detail}"
        if scores:
            got = sum(float(_num(i.get("score"))) for i in items if str(i.get("exercise", "?")) == ex)
            out_of = sum(float(_num(i.get("max_score"))) for i in mine)
            line = f"{ex}: {_num(got)} / {_num(out_of)} ({detail} on the lecture's sizes)"
        lines.append(line)
    if not items:
        lines.append("No gradable items were produced.")
    elif not scores:
        lines.append(
            "Points are awarded by the hidden-geometry tests, which check the same functions on other sizes; "
            "they become visible later."
        )
    return "\n".join(lines)


def to_results(
    result: dict,
    *,
    visibility: str = "visible",
    hidden_visibility: str = "after_published",
    execution_time: float | None = None,
) -> dict:
    """Convert a grading result (SubmissionResult.to_dict()) into a Gradescope results.json object.

    Each item becomes two tests: `ex1.dC`, its verdict on the lecture's sizes (worth no points, with
    `visibility`), and `ex1.dC (hidden geometry)`, which awards the item's points only when both geometries
    pass (with `hidden_visibility`, by default after the due date).
    """
    _check_visibility(visibility)
    _check_visibility(hidden_visibility)
    tests = []
    per_exercise: dict[str, int] = {}
    for item in result.get("items") or []:
        ex = str(item.get("exercise", "?"))
        per_exercise[ex] = per_exercise.get(ex, 0) + 1
        ex_no = ex[2:] if ex.startswith("ex") and ex[2:].isdigit() else ex
        name = str(item.get("id", f"{ex}.{item.get('name', '?')}"))
        number = f"{ex_no}.{per_exercise[ex]}"
        points = _num(item.get("max_score"))
        score = _num(item.get("score"))
        lecture = _lecture_view(item)
        tests.append(_test(name, number, 0, 0, lecture, visibility))
        hidden, said = _hidden(item)
        if hidden == "passed":
            output = f"PASSED: {name} on the hidden geometry too  ({score}/{points})"
        elif hidden == "failed":
            output = f"FAILED: {name} on the hidden geometry  (0/{points})\n{said}".rstrip()
        else:
            output = f"NOT CHECKED: {name} does not pass on the lecture's sizes yet  (0/{points}); see {name}."
        test = _test(f"{name} (hidden geometry)", f"{number}.1", score, points, item, hidden_visibility)
        test["status"] = "passed" if hidden == "passed" and item.get("status") == "passed" else "failed"
        test["output"] = output
        tests.append(test)
    out = {
        "score": _num(result.get("score")),
        "output": _summary(result, scores=hidden_visibility == "visible"),
        "output_format": "text",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if execution_time is not None:
        out["execution_time"] = _num(round(max(0.0, float(execution_time)), 2))
    return out


def _test(name: str, number: str, score, max_score, item: dict, visibility: str) -> dict:
    """Return one Gradescope test of an item."""
    shown = {**item, "score": score, "max_score": max_score}
    return {
        "name": name,
        "number": number,
        "score": score,
        "max_score": max_score,
        "status": "passed" if item.get("status") == "passed" else "failed",
        "output": _item_output(shown),
        "output_format": "text",
        "visibility": visibility,
    }


def _error_results(message: str, *, visibility: str, execution_time: float | None) -> dict:
    """Return a valid zero-score results.json object that explains why grading did not happen."""
    out = {
        "score": 0,
        "output": message,
        "output_format": "text",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": [],
    }
    if execution_time is not None:
        out["execution_time"] = _num(round(max(0.0, float(execution_time)), 2))
    return out


def _intake_note(submission) -> str:
    """Say which exercise files (or notebook cells) were graded, in intake's own words."""
    graded = submission.to_dict().get("graded_files", {})
    if not graded:
        return (
            "No exercise files were found in your submission: upload ex1.py, ex2.py, ex3.py and/or ex4.py "
            "(loose, in a folder, or in a zip), or your notebook."
        )
    notes = list(dict.fromkeys(n for n in submission.notes if n))
    if not notes:
        notes = ["Graded: " + ", ".join(f"{ex} from {label}" for ex, label in graded.items()) + "."]
    missing = [ex for ex in EXERCISES if ex not in graded]
    if missing:
        notes.append("Not found: " + ", ".join(missing) + ".")
    return "\n".join(notes)


def _hide_path(result: dict, staging: str) -> dict:
    """Replace the private staging folder in messages with words a student understands."""
    items = []
    for item in result.get("items") or []:
        item = dict(item)
        if isinstance(item.get("message"), str):
            item["message"] = item["message"].replace(staging, "your submission")
        items.append(item)
    return {**result, "submission": "submission", "items": items}


def _write_json(path: Path, data: dict) -> None:
    """Write data as JSON to path atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _with_hidden(graded) -> dict:
    """Return graded.to_dict() with each item's hidden-geometry verdict, which the JSON contract leaves out."""
    result = graded.to_dict() if hasattr(graded, "to_dict") else dict(graded)
    items = getattr(graded, "items", None)
    if isinstance(items, list) and len(items) == len(result.get("items") or []):
        result["items"] = [
            {
                **d,
                "hidden_geometry": {"status": getattr(i, "hidden", None), "message": getattr(i, "hidden_message", "")},
            }
            for d, i in zip(result["items"], items, strict=True)
        ]
    return result


def submission_times(root: Path) -> tuple[str, str, str]:
    """Return (when the submission was made, when it was due, '') from root/submission_metadata.json, or ('', '',
    what is missing).

    Gradescope writes `created_at` and `assignment.due_date` (ISO 8601 with their offsets). A user's own
    `assignment.due_date` (an extension, where the metadata gives one per user) is used instead, the latest of a
    group's. Only what the file says is read: nothing here runs or reads student code.
    """
    path = Path(root) / METADATA
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_METADATA_BYTES + 1)
        if len(raw) > _MAX_METADATA_BYTES:
            return "", "", f"{METADATA} is larger than {_MAX_METADATA_BYTES >> 20} MiB"
        data = json.loads(raw)
    except FileNotFoundError:
        return "", "", f"there is no {METADATA}"
    except (OSError, ValueError) as exc:
        return "", "", f"{METADATA} could not be read ({type(exc).__name__})"
    if not isinstance(data, dict):
        return "", "", f"{METADATA} is not a JSON object"
    created = data.get("created_at")
    assignment = data.get("assignment") if isinstance(data.get("assignment"), dict) else {}
    own = [
        u["assignment"].get("due_date")
        for u in data.get("users") or []
        if isinstance(u, dict) and isinstance(u.get("assignment"), dict)
    ]
    own = [d for d in own if parse_time(d) is not None]
    due = max(own, key=parse_time) if own else assignment.get("due_date")
    if parse_time(created) is None:
        return "", "", f"{METADATA} gives no submission time (created_at)"
    if parse_time(due) is None:
        return "", "", f"{METADATA} gives no due date (assignment.due_date)"
    return created, due, ""


def _late(root: Path, rule: LateRule | None, result: dict, *, scores: bool) -> tuple[str, dict | None]:
    """Take course.toml's late penalty off the graded result (in place); return (what the student reads, the
    instructors-only test), each empty when there is nothing to say.

    scores: whether the student sees scores now (the hidden tests are visible); before, they read only the fraction.
    """
    if rule is None:
        return "", None
    submitted, due, problem = submission_times(root)
    if problem:
        return "", _instructors("late penalty (instructors only)", f"course.toml's [late] was not applied: {problem}.")
    record = apply_late(result, rule, late=None, submitted_at=submitted, due=due)
    if record is None:
        return "", None
    days = record["days_late"]
    when = f"{days} day{'s' if days != 1 else ''} after the due date"
    fraction = f"{100 * record['fraction']:g}%"
    said = f"Late: submitted {when}, so a late penalty of {fraction} of the score applies"
    if scores:
        said += f": {_num(record['points'])} points off, {_num(record['raw_score'])} before the penalty"
    detail = (
        f"submitted {record['submitted_at']}, due {record['due']}: {when}. {fraction} of {_num(record['raw_score'])} "
        f"= {_num(record['points'])} points off; score {_num(result['score'])}."
    )
    return said + ".", _instructors("late penalty (instructors only)", detail)


def _instructors(name: str, output: str) -> dict:
    """Return a test only instructors see, worth nothing."""
    return {
        "name": name,
        "number": "0",
        "score": 0,
        "max_score": 0,
        "status": "passed",
        "visibility": "hidden",
        "output": output,
    }


def _walls_missing() -> type:
    """Return jail.WallsMissing, imported lazily (the sandbox imports torch's neighbours)."""
    from grader.sandbox.jail import WallsMissing

    return WallsMissing


def run(root: Path, *, visibility: str | None = None, policy: Policy | None = None, unsafe: bool = False) -> dict:
    """Grade root/submission with the grader and write root/results/results.json, whatever happens.

    policy: the course policy (points, message level, secret, visibility); visibility overrides its visibility.
    unsafe: grade even where the sandbox's minimum walls cannot be put up (otherwise no student code runs).
    """
    policy = policy or Policy()
    visibility = _check_visibility(visibility or policy.visibility)
    root = Path(root)
    results_path = root / "results" / "results.json"
    start = time.monotonic()
    try:
        from grader.grading import runner  # lazily: it imports torch
        from grader.sandbox import Limits, jail, protections
        from grader.submissions.intake import read_submission  # the same rules as `grade batch`: files, zips, notebooks

        missing = protections().missing_minimum()
        if missing and not unsafe:
            raise jail.WallsMissing(missing)

        limit = deadline.overall(deadline.per_submission(Limits().timeout))  # a results.json, even then
        with limit, runner.one_student_process():
            target = read_submission(root / "submission")
            target.name = "submission"
            note = _intake_note(target)
            graded = runner.grade(target, list(EXERCISES), **grade_kwargs(policy))
        result = _hide_path(_with_hidden(graded), str(root / "submission"))
        # course.toml's [late], from Gradescope's metadata: here, once grading is over, never in the sandbox
        late, late_test = _late(root, policy.late, result, scores=policy.hidden_visibility == "visible")
        results = to_results(
            result,
            visibility=visibility,
            hidden_visibility=policy.hidden_visibility,
            execution_time=time.monotonic() - start,
        )
        results["output"] = note + "\n\n" + (late + "\n\n" if late else "") + results["output"]
        if late_test is not None:
            results["tests"].append(late_test)
        json.dumps(results, allow_nan=False)  # fail here, not half-way through the write
    except _walls_missing() as exc:
        results = _error_results(
            "The autograder could not put up its sandbox, so none of your code was run; your score is 0 for now. "
            "The course staff can see why.",
            visibility=visibility,
            execution_time=time.monotonic() - start,
        )
        results["tests"].append(  # instructors only: which wall, and what to do
            {
                "name": "sandbox (instructors only)",
                "score": 0,
                "max_score": 0,
                "visibility": "hidden",
                "output": str(exc),
            }
        )
    except deadline.GradingTooLong as exc:
        results = _error_results(
            f"The autograder stopped: {exc} (each function call also has a limit of its own). Your score is 0 "
            "for now; tell the course staff if your submission is plain exercise files or a plain notebook.",
            visibility=visibility,
            execution_time=time.monotonic() - start,
        )
    except BaseException as exc:  # a results.json must exist whatever went wrong
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        results = _error_results(
            "The autograder hit an internal error and could not grade this submission; your score is 0 "
            "for now. Please tell the course staff (this is usually not a problem with your code).\n\n"
            f"Error: {detail}",
            visibility=visibility,
            execution_time=time.monotonic() - start,
        )
    _write_json(results_path, results)
    return results


def _zip_write(zf: zipfile.ZipFile, name: str, data: bytes, *, executable: bool = False) -> None:
    """Add one file to zf with Unix permissions (0755 if executable, else 0644)."""
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.create_system = 3  # Unix, so unzip honours the mode bits
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def _package_files(project_root: Path) -> list[tuple[str, Path]]:
    """List (archive name, path) for the installable grader source: pyproject.toml, README.md, grader/."""
    files = [("pyproject.toml", project_root / "pyproject.toml")]
    if (project_root / "README.md").is_file():
        files.append(("README.md", project_root / "README.md"))
    for path in sorted((project_root / "grader").rglob("*")):
        rel = path.relative_to(project_root)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo"):
            files.append((rel.as_posix(), path))
    return files


def build_autograder_zip(
    out_zip: Path,
    project_root: Path,
    *,
    visibility: str | None = None,
    policy: Policy | None = None,
    unsafe: bool = False,
) -> Path:
    """Write the Gradescope autograder zip (setup.sh, run_autograder, course.toml, grader source) to out_zip.

    The zip's course.toml is the whole policy, secret included: the zip goes to Gradescope, never to students.
    A policy without a secret gets a random one here, so every submission and every regrade of this
    autograder uses the same hidden geometry. visibility, when given, overrides the policy's.
    """
    policy = policy or Policy()
    if visibility is not None:
        policy = replace(policy, visibility=_check_visibility(visibility))
    if policy.secret is None:
        policy = replace(policy, secret=secrets.token_urlsafe(24))
    project_root, out_zip = Path(project_root), Path(out_zip)
    if not (project_root / "pyproject.toml").is_file() or not (project_root / "grader").is_dir():
        raise FileNotFoundError(f"{project_root} has no pyproject.toml and grader/: not the grader project")
    files = _package_files(project_root)
    names = [name for name, _ in files]
    bad = [n for n in names if n.split("/")[0] in ("reference", "tests", "bench", "exercises")]
    if bad:
        raise RuntimeError(f"refusing to put instructor-only files in the autograder zip: {bad}")
    out_zip.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_zip.with_name(out_zip.name + ".part")
    with zipfile.ZipFile(tmp, "w") as zf:
        _zip_write(zf, "setup.sh", SETUP_SH.replace("__TORCH__", TORCH_VERSION).encode(), executable=True)
        _zip_write(
            zf,
            "run_autograder",
            RUN_AUTOGRADER.replace("__VISIBILITY__", policy.visibility)
            .replace(" __UNSAFE__", " --unsafe" if unsafe else "")
            .encode(),
            executable=True,
        )
        _zip_write(zf, FILENAME, policy.to_toml().encode())
        if "README.md" not in names:  # pyproject.toml names it, so pip needs it to exist
            _zip_write(zf, "README.md", STUB_README.encode())
        for name, path in files:
            _zip_write(zf, name, path.read_bytes())
    os.replace(tmp, out_zip)
    return out_zip


def main(argv: list[str] | None = None) -> dict:
    """Grade a Gradescope /autograder tree from the command line and return the results written."""
    parser = argparse.ArgumentParser(
        prog="python -m grader.ship.gradescope",
        description="Grade ROOT/submission and write ROOT/results/results.json for Gradescope.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")),
        help="the autograder folder (default: $AUTOGRADER_ROOT or /autograder)",
    )
    parser.add_argument("--course", type=Path, default=None, help="the course policy (course.toml), if there is one")
    parser.add_argument("--visibility", choices=VISIBILITIES, default=None, help="override the policy's visibility")
    parser.add_argument("--unsafe", action="store_true", help="grade even without the sandbox's minimum walls")
    args = parser.parse_args(argv)
    try:
        policy = load(args.course) if args.course is not None else Policy()
    except PolicyError as exc:  # still write a results.json the student can read
        results = _error_results(
            f"The autograder is misconfigured and could not grade this submission; please tell the course "
            f"staff.\n\nError: {exc}",
            visibility=args.visibility or "visible",
            execution_time=None,
        )
        _write_json(Path(args.root) / "results" / "results.json", results)
        return results
    return run(args.root, visibility=args.visibility, policy=policy, unsafe=args.unsafe)


if __name__ == "__main__":
    _results = main()
    # This goes to /autograder/results/stdout, which only instructors see.
    print(_results["output"])  # noqa: T201
    for _test in _results["tests"]:
        print(f"{_test['name']}: {_test['score']}/{_test['max_score']} {_test.get('status', '')}")  # noqa: T201
