"""Grade a folder of submissions in parallel: gradebook, per-student JSON, class statistics and a report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from grader.classroom import pool
from grader.classroom.deadline import per_submission
from grader.classroom.early import BatchNeedsLinux, Early  # noqa: F401 (BatchNeedsLinux re-exported)
from grader.classroom.early import start as start_early
from grader.classroom.reports import write_outputs
from grader.classroom.reports.html import html_report  # noqa: F401 (re-exported)
from grader.classroom.reports.sources import graded_sources
from grader.classroom.reports.summary import summarize  # noqa: F401 (re-exported)
from grader.classroom.reports.tables import GRADEBOOK_COLUMNS, gradebook  # noqa: F401 (re-exported)
from grader.sandbox import Limits, backend, costs, jail, pages, protections, zygote
from grader.show import table as report
from grader.spec import catalogue
from grader.spec.policy import Policy, apply_late, grade_kwargs
from grader.submissions.intake import Entry, Skipped, discover, read_entry, with_intake  # noqa: F401 (re-exported)
from grader.truth import server as prebuild

MANIFEST = "manifest.json"
JOURNAL = ".graded"  # a line per student as their file is written: what --resume keeps after an interrupted run


# Huge pages take ~0.15 s of CPU (0.3 s wall) to make, and each sandbox forked from them costs ~8 ms less kernel
# time to fork and to end (11 ms against 3 ms, fork and exit of a child of the warm scheduler's image): worth it
# from a few dozen students on
COLLAPSE_FROM = 40


def grade_one_student(args) -> dict:
    """Grade one student; runs in a grading process of its own (see pool.py)."""
    entry, limits, data, policy = args
    from grader.grading.runner import grade

    submission = read_entry(entry)  # never raises: what is wrong with the files is in its notes
    result = grade(submission, data=data, limits=limits, name=entry.student, **grade_kwargs(policy))
    return with_intake(result.to_dict(), submission)


def _digest(entry: Entry, options: str) -> str:
    """Return an entry's digest for --resume; one that cannot be read is graded again each time, not fatal."""
    try:
        return entry.digest(options)
    except Exception as exc:  # noqa: BLE001 - its grading process meets the same files and says what is wrong
        return f"unreadable: {type(exc).__name__}"


def _digest_alone(entry: Entry, options: str, deadline: float) -> str:
    """Return an entry's digest, computed in a helper of its own; one that fails makes the entry unreadable."""
    try:
        return pool.in_child(lambda: _digest(entry, options), deadline=deadline)
    except RuntimeError as exc:
        return f"unreadable: {exc}"


def _warm_up(data=None):
    """Import and warm, once here, what every grading process would otherwise import and warm for itself."""
    from grader.grading import runner
    from grader.sandbox import child
    from grader.submissions.intake import read

    child.warm_up()
    runner.prepare_judging(data)  # the lecture's allowed errors and trap variants, once for every grading process
    read.stub_texts()  # the released stubs, checked once here rather than in every grading process


def _failed(entry, why: str, policy, data) -> dict:
    """Return the result of a student whose grading process could not finish: every item an error."""
    from grader.grading.runner import failed_result

    result = failed_result(entry.student, f"The grader could not finish this submission: {why}.", data)
    policy.apply(result)
    out = result.to_dict()
    out["grader_failed"] = True  # not a score: every output says so, and the run exits non-zero
    if entry.identity:
        out["identity"] = dict(entry.identity)
    if entry.late is not None:
        out["late"] = entry.late
    return out


def _write_json(path: Path, obj) -> None:
    """Write obj as JSON, whole or not at all (an interrupted run never leaves half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def _journal(path: Path, student: str, digest: str) -> None:
    """Append one finished student to the run's journal (one write: a line is there whole or not at all)."""
    line = json.dumps([student, digest]) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _read_journal(path: Path) -> dict[str, str]:
    """Return {student: digest} from a journal; a torn last line (the run was killed mid-write) is ignored."""
    done = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return done
    for line in lines:
        try:
            student, digest = json.loads(line)
        except ValueError:
            continue
        if isinstance(student, str) and isinstance(digest, str):
            done[student] = digest
    return done


def grade_batch(
    submissions: Path,
    out: Path,
    *,
    jobs: int = 2,
    limits: Limits | None = None,
    resume: bool = False,
    data: str | None = None,
    progress: bool = True,
    similarity: bool = True,
    canvas_assignment: str | None = None,
    policy: Policy | None = None,
    unsafe: bool = False,
    early: Early | None = None,
) -> dict:
    """Grade every submission in a folder into OUT and return the class summary.

    unsafe: grade even where the sandbox's minimum walls cannot be put up (jail.WallsMissing otherwise).
    early: what early.start() began for this folder before torch was imported (the command's way); None starts
    it now.
    """
    limits = limits or Limits()
    policy = policy or Policy()
    early = early or start_early(submissions, policy.similarity_base, similarity)
    entries, skipped, compared = early.entries, early.skipped, early.compared
    reading = None
    try:
        walls = protections()
        if walls.missing_minimum() and not unsafe:
            raise jail.WallsMissing(walls.missing_minimum())
        (out / "students").mkdir(parents=True, exist_ok=True)
        options = f"{limits.timeout}|{limits.memory_mb}|{data}|{policy.fingerprint()}"
        manifest_path, journal = out / MANIFEST, out / JOURNAL
        manifest = json.loads(manifest_path.read_text()) if resume and manifest_path.exists() else {}
        if resume:  # what an interrupted run finished before it stopped (one line per student, as each was written)
            manifest.update(_read_journal(journal))
        else:
            journal.unlink(missing_ok=True)
        # read in a throwaway child (the scheduling process must never hold a student's files, see pool.py), while
        # this process builds the lecture's truth
        reading = pool.Background(lambda: {e.student: _digest(e, options) for e in entries})
        torch.set_num_threads(1)  # GNU OpenMP does not survive fork; the tensors here are tiny anyway
        # the graded geometry's truth once here, for every grading process to inherit; each student's hidden
        # geometry is drawn from their own files, and its truth is built apart from this process (see _graded)
        catalogue.build_fixtures(catalogue.select(catalogue.EXERCISES), data, None)
        _warm_up(data)
        try:
            digests = reading.result(timeout=3600)
        except RuntimeError:  # the helper died (a student's files exhausted its memory, say): one helper each
            digests = {e.student: _digest_alone(e, options, per_submission(limits.timeout)) for e in entries}
        todo = [
            e
            for e in entries
            if not (
                resume
                and manifest.get(e.student) == digests[e.student]
                and (out / "students" / f"{e.student}.json").exists()
            )
        ]
        collapse = pages.collapse_heap if len(todo) >= COLLAPSE_FROM else None  # see _graded
        server = None if _long_lived() else prebuild.serve()  # a long-lived grading process builds its own truth
    except BaseException:
        for helper in (compared, reading):
            if helper is not None:
                helper.kill()
        raise
    bar = report.Progress(len(todo), "grading") if progress else None
    failed: list[str] = []
    work = [(e, limits, data, policy) for e in todo]
    deadline = per_submission(limits.timeout)  # a bound no honest submission comes near
    with jail.held():  # made here, so the grading processes share it and it is removed when the run ends
        try:
            graded = _graded(work, jobs, deadline, collapse)
            for (entry, *_), result, why in graded:
                if result is not None:  # course.toml's [late]: here, after grading, never where student code runs
                    apply_late(result, policy.late, late=entry.late, submitted_at=entry.submitted_at)
                _write_json(out / "students" / f"{entry.student}.json", result or _failed(entry, why, policy, data))
                if result is not None:  # a grading process that failed (killed, overran) is graded again on --resume
                    manifest[entry.student] = digests[entry.student]
                    _journal(journal, entry.student, digests[entry.student])
                else:
                    manifest.pop(entry.student, None)
                    failed.append(entry.student)
                if bar:
                    bar.advance(entry.student)
        except BaseException:
            if compared is not None:
                compared.kill()
            raise
        finally:
            if server is not None:
                server.close()
            if bar:
                bar.close()
    manifest = {k: manifest[k] for k in sorted(manifest) if k in digests}
    _write_json(manifest_path, manifest)
    journal.unlink(missing_ok=True)  # the manifest holds it all now
    students = {e.student: json.loads((out / "students" / f"{e.student}.json").read_text()) for e in entries}
    if walls.missing_minimum() and progress:
        report.note("sandbox: graded with --unsafe, without: " + "; ".join(walls.missing_minimum()))
    elif walls.missing() and progress:
        report.note("sandbox: extra walls off here: " + "; ".join(walls.missing()))
    costs.note("scheduler")
    return write_outputs(
        out,
        entries,
        skipped,
        students,
        similarity=_similarity(compared),
        canvas_assignment=canvas_assignment,
        sandbox={**walls.to_dict(), "unsafe": bool(walls.missing_minimum())},
        grader_failed=failed,
        policy=policy.describe(),
        sources=lambda: graded_sources(entries, digests, options),
    )


def _long_lived() -> bool:
    """Whether students are graded in long-lived grading processes, each with a zygote (see pool.run_graders)."""
    return zygote.supported() and backend() == "fork"


def _graded(work: list, jobs: int, deadline: float, collapse):
    """Grade every student: in long-lived grading processes whose sandboxes a clean zygote forks, where the
    platform allows; otherwise in a grading process forked per student."""
    if not _long_lived():
        return pool.run(work, grade_one_student, jobs=jobs, deadline=deadline, after_first=collapse)
    from grader.grading.runner import between_students

    if collapse is not None:  # before the zygotes are forked: every sandbox is forked from their huge pages
        collapse()
    return pool.run_graders(work, grade_one_student, jobs=jobs, deadline=deadline, between=between_students)


def _similarity(compared: pool.Background | None) -> dict | bool:
    """Return the background comparison's result, or why there is none."""
    if compared is None:
        return False
    try:
        return compared.result()
    except RuntimeError as exc:  # the helper died (the OOM killer, say): the gradebook is written all the same
        return {"error": str(exc)[:300]}
