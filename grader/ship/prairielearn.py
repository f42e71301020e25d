"""PrairieLearn glue: grade /grade/student into /grade/results/results.json, and write what a course repo needs.

PrairieLearn's contract (docs/externalGrading.md of PrairieLearn/PrairieLearn, "The Grading Process" and "Grading
results"): the question's files arrive under /grade (the `serverFilesCourse` folders it names in
/grade/serverFilesCourse, its `tests/` in /grade/tests, the student's files in /grade/student, the question's `data`
in /grade/data/data.json), the entrypoint runs, and by the time it ends it must have written
/grade/results/results.json, a folder PrairieLearn does not create. That file holds `score` (a number in [0, 1],
required unless the submission is not gradable), optionally `gradable` (false: "invalid, not gradable", no attempt
used) with `format_errors` (a string or a list of strings), `message`, `output`, `images`, and `tests`, each with
`name`, `description`, `points`, `max_points`, `message`, `output`, `images`; at most 1 MB.

The items become tests as on Gradescope (grader/ship/gradescope.py): `ex1.dC` (its verdict on the lecture's sizes,
0/0 points) and `ex1.dC (hidden geometry)` (the item's points, awarded only when both geometries pass). PrairieLearn
has no per-test visibility: the student sees both at once, and the score.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import traceback
from dataclasses import replace
from pathlib import Path

from grader.classroom import deadline as overall
from grader.ship.gradescope import (
    EXERCISES,
    _hidden,
    _hide_path,
    _item_output,
    _lecture_view,
    _num,
    _package_files,
    _summary,
    _walls_missing,
    _with_hidden,
    _write_json,
)
from grader.ship.release import TORCH_VERSION
from grader.spec.policy import FILENAME, Policy, PolicyError, grade_kwargs, load

GRADE_ROOT = "/grade"
FOLDER = "backprop_ninja"  # serverFilesCourse/backprop_ninja/ in the course repository
RESULTS_LIMIT = 1_000_000  # "this file should be limited to 1 MB"
TEXT_LIMIT = 4_000  # characters of one test's message or output kept when the whole file would pass the limit
CALL_TIMEOUT = 10.0  # seconds per function call, as `grade batch` and Gradescope
DEADLINE = 100.0  # seconds the whole grading may take: below info.json's timeout (120 in the note), never above
LECTURE_DESCRIPTION = "On the lecture's sizes; no points here: the points are in the hidden-geometry test."
HIDDEN_DESCRIPTION = "The same function on other sizes; the item's points, awarded only when both sizes pass."
NOTHING = (
    "No exercise files were found in your submission: upload {names} (loose, in a folder, or in a zip), "
    "or your notebook."
)
NOT_GRADED = "This submission was not graded (it costs you no attempt)."
NO_SANDBOX = (
    "The autograder could not put up its sandbox, so none of your code was run and this submission was not "
    "graded (it costs you no attempt). Please tell the course staff."
)

RUN_SH = """#!/usr/bin/env bash
# PrairieLearn's entrypoint (info.json externalGradingOptions.entrypoint): grades /grade/student into
# /grade/results/results.json, whatever happens. Extra arguments pass on, e.g. `run.sh --exercise ex2`.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${GRADE_ROOT:-/grade}"
COURSE="$HERE/course.toml"
if [ -f "$ROOT/tests/course.toml" ]; then  # a question's own policy (its tests/ folder) wins
    COURSE="$ROOT/tests/course.toml"
fi
mkdir -p "$ROOT/results"  # PrairieLearn does not create it
rm -f "$ROOT/results/results.json"
# From here, never from the student's folder: `python -m` puts the working directory first on sys.path.
cd "$HERE" || exit 0
PYTHONPATH="$HERE" "${PYTHON:-python3}" -m grader.ship.prairielearn --root "$ROOT" --course "$COURSE" __OPTIONS__ "$@"
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    # The grader could not even start: still hand PrairieLearn a valid result the student can read.
    printf '{"gradable": false, "score": 0, "message": "The autograder failed to start (exit status %s). Please \
tell the course staff; this is not a problem with your code.", "output": "", "tests": []}\\n' \\
        "$status" > "$ROOT/results/results.json"
fi
exit 0
"""

NOTE = """# backprop-ninja on PrairieLearn

`grade prairielearn` wrote `serverFilesCourse/__FOLDER__/`: the grader's source (`grader/`, `pyproject.toml`), the
course policy (`course.toml`, __SECRET__) and `run.sh`, the entrypoint. Copy that folder into your course
repository's `serverFilesCourse/`. PrairieLearn never serves `serverFilesCourse` to students, but `course.toml`
holds the secret that draws the hidden geometry: keep the course repository private.

## The image: build your own

No Docker image was built or tested by `grade prairielearn`. The question needs one that has Python 3.10 or newer,
torch __TORCH__ (the version the grader is tested with; the CPU-only wheel is enough) and the grader's
dependencies (`pip install` of this folder installs them: click, names, pyyaml, defusedcsv, copydetect, nbformat,
pyseccomp with libseccomp). PrairieLearn's stock Python image does not list torch. Grading jobs have no network by
default, so nothing can be installed while grading. On a machine with Docker, something like this is a start
(untested here):

    FROM python:3.11-slim
    RUN apt-get update && apt-get install -y --no-install-recommends libseccomp2 && rm -rf /var/lib/apt/lists/*
    RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==__TORCH__
    COPY serverFilesCourse/__FOLDER__ /opt/backprop_ninja
    RUN pip install --no-cache-dir /opt/backprop_ninja

Without the sandbox's minimum walls (the system-call allow-list needs libseccomp) no student code runs: every
submission comes back "invalid, not gradable" and `run.sh`'s output names the missing wall__UNSAFE__.

## info.json

Each question that grades the exercises gets, in its `info.json`:

```json
{
  "gradingMethod": "External",
  "externalGradingOptions": {
    "enabled": true,
    "image": "REPLACE-WITH-THE-IMAGE-YOU-BUILT",
    "serverFilesCourse": ["__FOLDER__/"],
    "entrypoint": "/grade/serverFilesCourse/__FOLDER__/run.sh",
    "timeout": 120
  }
}
```

- `timeout` (seconds; PrairieLearn's default is 30, its maximum 600) must stay above the grader's own overall
  limit, __DEADLINE__ s, so a submission that runs too long still gets a results.json that says so.
- One question per exercise: `"entrypoint": "/grade/serverFilesCourse/__FOLDER__/run.sh --exercise ex2"` grades
  only Ex2, and the score is that exercise's fraction.
- A `course.toml` in a question's `tests/` folder is used instead of the shared one (points, level, secret).

In `question.html`, let the student upload their files and show the results:

```html
<pl-file-upload optional-file-names="ex1.py, ex2.py, ex3.py, ex4.py"></pl-file-upload>
```

and, in the submission panel, `<pl-external-grader-results></pl-external-grader-results>`. A zip, a folder or a
notebook is read with the same intake rules as `grade batch` (docs/instructors.md).
"""


def _score(result: dict) -> float:
    """Return the submission's score as PrairieLearn wants it: the fraction of the points, in [0, 1]."""
    got, out_of = float(_num(result.get("score"))), float(_num(result.get("max_score")))
    if out_of <= 0:
        return 0.0
    return round(min(1.0, max(0.0, got / out_of)), 6)


def _shown_message(item: dict) -> str:
    """Return an item's message where the terminal table shows it: not passed, or with a trap."""
    message = str(item.get("message") or "").strip()
    if not message:
        return ""
    if item.get("status") not in ("passed", "not_attempted") or item.get("traps"):
        return message
    return ""


def _tests(result: dict) -> list[dict]:
    """Return two PrairieLearn tests per item: its lecture-geometry verdict (0/0), its hidden-geometry points."""
    tests = []
    for item in result.get("items") or []:
        ex = str(item.get("exercise", "?"))
        name = str(item.get("id", f"{ex}.{item.get('name', '?')}"))
        points, score = _num(item.get("max_score")), _num(item.get("score"))
        lecture = _lecture_view(item)
        tests.append(
            {
                "name": name,
                "description": LECTURE_DESCRIPTION,
                "points": 0,
                "max_points": 0,
                "message": _shown_message(lecture),
                "output": _item_output({**lecture, "score": 0, "max_score": 0, "message": ""}),
            }
        )
        hidden, said = _hidden(item)
        passed = hidden == "passed" and item.get("status") == "passed"
        if passed:
            output, message = f"PASSED: {name} on the hidden geometry too  ({score}/{points})", ""
        elif hidden == "failed":
            output, message = f"FAILED: {name} on the hidden geometry  (0/{points})", said.strip()
        else:
            output = f"NOT CHECKED: {name} does not pass on the lecture's sizes yet  (0/{points}); see {name}."
            message = ""
        tests.append(
            {
                "name": f"{name} (hidden geometry)",
                "description": HIDDEN_DESCRIPTION,
                "points": score if passed else 0,
                "max_points": points,
                "message": message,
                "output": output,
            }
        )
    return tests


def _flag_notes(result: dict) -> list[str]:
    """Return the flag lines the terminal table ends with (show/table.py), which a student sees there too."""
    from grader.grading.scan import flagged_note, numeric_note

    flags = result.get("flags") or {}
    notes = (
        flagged_note(flags.get("private_internals") or []),
        numeric_note(flags.get("numeric_differentiation") or []),
    )
    return [n for n in notes if n]


def to_results(result: dict, *, note: str = "") -> dict:
    """Convert a grading result (SubmissionResult.to_dict(), with hidden_geometry per item) into results.json.

    note: what intake says about the files (which were graded), the start of `output`.
    """
    output = "\n\n".join(part for part in (note.strip(), "\n".join(_flag_notes(result))) if part)
    return {
        "gradable": True,
        "score": _score(result),
        "message": _summary(result, scores=True),
        "output": output,
        "tests": _tests(result),
    }


def not_gradable(message: str, *, format_errors: list[str] | None = None, output: str = "") -> dict:
    """Return a results.json object for a submission PrairieLearn should not count: no score, no attempt used."""
    out = {"gradable": False, "score": 0, "message": message, "output": output, "tests": []}
    if format_errors:
        out["format_errors"] = list(format_errors)
    return out


def _fit(results: dict, limit: int = RESULTS_LIMIT) -> dict:
    """Return results cut to PrairieLearn's 1 MB: long test texts first, then the whole output."""
    if len(json.dumps(results, allow_nan=False).encode()) <= limit:
        return results
    cut = "\n[... cut: results.json must stay under 1 MB]"
    for test in results.get("tests") or []:
        for key in ("message", "output"):
            if len(test.get(key) or "") > TEXT_LIMIT:
                test[key] = test[key][:TEXT_LIMIT] + cut
    for key in ("message", "output"):
        if len(json.dumps(results).encode()) > limit and len(results.get(key) or "") > TEXT_LIMIT:
            results[key] = results[key][:TEXT_LIMIT] + cut
    if len(json.dumps(results).encode()) > limit:
        for test in results.get("tests") or []:
            test["output"] = ""
    return results


def _intake_note(submission, exercises) -> tuple[str, bool]:
    """Return what intake says about the files, and whether any of the asked exercises was found."""
    graded = submission.to_dict().get("graded_files", {})
    found = [ex for ex in exercises if ex in graded]
    if not found:
        return NOTHING.format(names=", ".join(f"{ex}.py" for ex in exercises)), False
    notes = list(dict.fromkeys(n for n in submission.notes if n))
    if not notes:
        notes = ["Graded: " + ", ".join(f"{ex} from {label}" for ex, label in graded.items()) + "."]
    missing = [ex for ex in exercises if ex not in graded]
    if missing:
        notes.append("Not found: " + ", ".join(missing) + ".")
    return "\n".join(notes), True


def run(
    root: Path,
    *,
    policy: Policy | None = None,
    unsafe: bool = False,
    exercises=EXERCISES,
    timeout: float = CALL_TIMEOUT,
    deadline: float = DEADLINE,
) -> dict:
    """Grade root/student with the grader and write root/results/results.json, whatever happens.

    policy: the course policy (points, message level, secret). unsafe: grade even where the sandbox's minimum
    walls cannot be put up (otherwise no student code runs). exercises: the ones this question grades.
    timeout: seconds per function call; deadline: seconds for the whole grading (keep it below info.json's timeout).
    """
    policy = policy or Policy()
    exercises = [ex for ex in EXERCISES if ex in set(exercises)]
    root = Path(root)
    try:
        from grader.grading import runner  # lazily: it imports torch
        from grader.sandbox import Limits, jail, protections
        from grader.submissions.intake import read_submission  # the same rules as `grade batch`

        missing = protections().missing_minimum()
        if missing and not unsafe:
            raise jail.WallsMissing(missing)
        with overall.overall(deadline), runner.one_student_process():
            target = read_submission(root / "student")
            target.name = "submission"
            note, found = _intake_note(target, exercises)
            if not found:
                results = not_gradable(NOT_GRADED, format_errors=[note])
            else:
                graded = runner.grade(target, exercises, limits=Limits(timeout=timeout), **grade_kwargs(policy))
                result = _hide_path(_with_hidden(graded), str(root / "student"))
                results = to_results(result, note=note)
        json.dumps(results, allow_nan=False)  # fail here, not half-way through the write
    except _walls_missing() as exc:
        results = not_gradable(NO_SANDBOX, output=f"sandbox: {exc}")
    except overall.GradingTooLong as exc:
        results = not_gradable(
            f"The autograder stopped: {exc} (each function call also has a limit of its own). This submission "
            "was not graded; tell the course staff if it is plain exercise files or a plain notebook."
        )
    except BaseException as exc:  # a results.json must exist whatever went wrong
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        results = not_gradable(
            "The autograder hit an internal error and could not grade this submission (it costs you no attempt). "
            "Please tell the course staff; this is usually not a problem with your code.",
            output=f"Error: {detail}",
        )
    results = _fit(results)
    _write_json(root / "results" / "results.json", results)
    return results


def _write(path: Path, data: bytes, *, executable: bool = False) -> None:
    """Write one file of the course files (0755 if executable, else 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)


def build_course_files(
    outdir: Path,
    project_root: Path,
    *,
    policy: Policy | None = None,
    unsafe: bool = False,
    timeout: float = CALL_TIMEOUT,
    deadline: float = DEADLINE,
) -> Path:
    """Write outdir/serverFilesCourse/backprop_ninja/ (run.sh, course.toml, the grader's source) and
    outdir/PRAIRIELEARN.md (the image and info.json's externalGradingOptions); return outdir.

    The course.toml is the whole policy, secret included (serverFilesCourse never reaches students); a policy
    without a secret gets a random one here, so a regrade of the same files draws the same hidden geometry.
    """
    policy = policy or Policy()
    drawn = policy.secret is None
    if drawn:
        policy = replace(policy, secret=secrets.token_urlsafe(24))
    outdir, project_root = Path(outdir), Path(project_root)
    if not (project_root / "pyproject.toml").is_file() or not (project_root / "grader").is_dir():
        raise FileNotFoundError(f"{project_root} has no pyproject.toml and grader/: not the grader project")
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise FileExistsError(f"{outdir} already exists and is not empty; remove it or choose another folder")
    files = _package_files(project_root)
    bad = [n for n, _ in files if n.split("/")[0] in ("reference", "tests", "bench", "exercises")]
    if bad:
        raise RuntimeError(f"refusing to put instructor-only files in the course files: {bad}")
    if deadline <= 0 or timeout <= 0:
        raise ValueError("--timeout and --deadline must be positive")
    options = f"--timeout {timeout:g} --deadline {deadline:g}" + (" --unsafe" if unsafe else "")
    folder = outdir / "serverFilesCourse" / FOLDER
    _write(folder / "run.sh", RUN_SH.replace("__OPTIONS__", options).encode(), executable=True)
    _write(folder / FILENAME, policy.to_toml().encode())
    for name, path in files:
        _write(folder / name, path.read_bytes())
    if not (folder / "README.md").exists():  # pyproject.toml names it, so pip needs it to exist
        _write(folder / "README.md", b"# backprop-ninja grader\n")
    secret = "with a random secret drawn now, as your policy had none" if drawn else "secret included"
    note = (
        NOTE.replace("__FOLDER__", FOLDER)
        .replace("__TORCH__", TORCH_VERSION)
        .replace("__DEADLINE__", f"{deadline:g}")
        .replace("__SECRET__", secret)
        .replace("__UNSAFE__", " (this build has --unsafe: it grades anyway)" if unsafe else "")
    )
    _write(outdir / "PRAIRIELEARN.md", note.encode())
    return outdir


def main(argv: list[str] | None = None) -> dict:
    """Grade a PrairieLearn /grade tree from the command line and return the results written."""
    parser = argparse.ArgumentParser(
        prog="python -m grader.ship.prairielearn",
        description="Grade ROOT/student and write ROOT/results/results.json for PrairieLearn.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(os.environ.get("GRADE_ROOT", GRADE_ROOT)),
        help="the grading job's folder (default: $GRADE_ROOT or /grade)",
    )
    parser.add_argument("--course", type=Path, default=None, help="the course policy (course.toml), if there is one")
    parser.add_argument(
        "--exercise", action="append", choices=EXERCISES, default=None, help="grade only this exercise (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=CALL_TIMEOUT, help="seconds per function call")
    parser.add_argument("--deadline", type=float, default=DEADLINE, help="seconds the whole grading may take")
    parser.add_argument("--unsafe", action="store_true", help="grade even without the sandbox's minimum walls")
    args = parser.parse_args(argv)
    try:
        policy = load(args.course) if args.course is not None else Policy()
    except PolicyError as exc:  # still write a results.json the student can read
        results = not_gradable(
            "The autograder is misconfigured and could not grade this submission (it costs you no attempt); "
            "please tell the course staff.",
            output=f"Error: {exc}",
        )
        _write_json(Path(args.root) / "results" / "results.json", results)
        return results
    return run(
        args.root,
        policy=policy,
        unsafe=args.unsafe,
        exercises=args.exercise or EXERCISES,
        timeout=args.timeout,
        deadline=args.deadline,
    )


if __name__ == "__main__":
    _results = main()
    # the grading job's log, which course staff see
    sys.stdout.write(f"gradable: {_results['gradable']}  score: {_results.get('score')}\n{_results['message']}\n")
