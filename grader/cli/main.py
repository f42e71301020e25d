"""The `grade` command: a thin click layer over runner, batch, release and gradescope."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.show import table as report
from grader.spec import EXERCISES
from grader.spec.policy import LEVELS

DEFAULT_SUBMISSION = "exercises"

_GRADE_HELP = {
    "ex1": "Grade Ex1: the 26 atomic gradients, dlogprobs back to dC.",
    "ex2": "Grade Ex2: dlogits through the cross-entropy shortcut.",
    "ex3": "Grade Ex3: dhprebn through the BatchNorm shortcut.",
    "ex4": "Grade Ex4: the compact backward pass, one step and several SGD steps.",
    "all": "Grade all four exercises.",
}


from grader.cli import STUDENT_COMMANDS  # noqa: E402 - one list, for the prespawn and for --help

OTHER_COMMANDS = ("warm",)  # neither a student's grading nor an instructor's: listed apart in --help


class _Grouped(click.Group):
    """A click group whose --help lists the student commands first and the instructor ones apart."""

    def list_commands(self, ctx):
        rest = sorted(c for c in self.commands if c not in STUDENT_COMMANDS + OTHER_COMMANDS)
        return [c for c in STUDENT_COMMANDS + OTHER_COMMANDS if c in self.commands] + rest

    def format_commands(self, ctx, formatter):
        limit = formatter.width - 6 - max(len(c) for c in self.commands)
        for title, names in (
            ("Student commands", [c for c in self.list_commands(ctx) if c in STUDENT_COMMANDS]),
            ("Instructor commands", [c for c in self.list_commands(ctx) if c not in STUDENT_COMMANDS + OTHER_COMMANDS]),
            ("Other commands", [c for c in self.list_commands(ctx) if c in OTHER_COMMANDS]),
        ):
            rows = [(c, self.commands[c].get_short_help_str(limit)) for c in names if not self.commands[c].hidden]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=_Grouped, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Grade hand-derived backpropagation (makemore part 4) against autograd."""


def _data_option(f):
    return click.option(
        "--data",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        callback=_check_data,
        help="Names corpus, one name per line (the lecture's names.txt). Default: the census names.",
    )(f)


def _check_data(ctx, param, value):
    """Read the corpus now, so that a file that cannot serve says why here, not in a traceback later."""
    if value is not None:
        from grader.truth import corpus

        try:
            corpus.load(value)
        except corpus.CorpusError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def _course_option(f):
    return click.option(
        "--course",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="The course policy (course.toml): points, message level, hidden geometry. "
        "Default: a course.toml in or beside the submission folder.",
    )(f)


def _policy(course, folder, inside: bool = True):
    """Return the course policy of --course, or of a course.toml found beside folder, or the default.

    inside: also look inside folder (a class's submissions folder; never one student's own folder).
    """
    from grader.spec.policy import PolicyError, resolve

    try:
        return resolve(course, folder, inside)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--course") from exc


def _make_grade_command(which: str):
    exercises = EXERCISES if which == "all" else (which,)

    @click.option(
        "--submission",
        "-s",
        type=click.Path(),
        default=None,
        help=f"Folder holding ex1.py .. ex4.py, or a notebook (.ipynb). Default: ./{DEFAULT_SUBMISSION}.",
    )
    @click.option("--only", multiple=True, metavar="NAME", help="Grade only this function or item (repeatable).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
    @click.option("--verbose", is_flag=True, help="Also list the sandbox walls this machine lacks, one per line.")
    @click.option(
        "--level",
        type=click.Choice(LEVELS),
        default=None,
        help="How much each message says: diagnose (what is wrong and where), hint (also how to fix it) or "
        "full (also the formula). Default: diagnose, or the level of the course.toml, which is also the maximum.",
    )
    @click.option("--hints", is_flag=True, help="Add a longer explanation of each trap (at the message level).")
    @click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per function call.")
    @_data_option
    @_course_option
    def command(submission, only, as_json, verbose, level, hints, timeout, data, course, **extra):
        from grader.grading.runner import grade
        from grader.sandbox import Limits
        from grader.spec import catalogue

        if only:
            known = {i.name for i in catalogue.items(exercises)} | {i.id for i in catalogue.items(exercises)}
            unknown = [o for o in only if o not in known and o != "backward"]
            if unknown:
                raise click.BadParameter(f"{', '.join(unknown)} is not an item of {which}", param_hint="--only")
        if extra.get("curve") and not extra.get("full"):
            raise click.UsageError("--curve draws the loss curve of the --full training run: add --full.")
        if submission is None:
            submission = _default_submission()
        graded = Path(submission)
        if not (graded.is_dir() and any((graded / f"{ex}.py").is_file() for ex in EXERCISES)):
            from grader.submissions.notebook.submission import cli_submission  # a notebook or an archive: read it first

            try:
                graded = cli_submission(graded)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--submission") from exc
        from grader.spec.policy import grade_kwargs

        policy = _policy(course, submission or DEFAULT_SUBMISSION, inside=False)  # never the student's own
        limits = Limits(timeout=timeout)
        kwargs = grade_kwargs(policy)
        kwargs["level"] = _level(level, policy)
        from grader.cli import take_ahead

        kwargs.update(sandbox=take_ahead(), wait_for_sandboxes=not _EXITS_AT_ONCE[0])
        result = grade(graded, exercises, only=only or None, data=data, limits=limits, **kwargs)
        walls = _say_missing_walls(as_json, verbose)
        if not isinstance(graded, Path):  # a notebook or an archive: say which cells or files were graded
            from grader.submissions.notebook.submission import notes_for

            notes = list(graded.notes)
            if str(submission).lower().endswith(".ipynb"):  # a notebook's student has cells, not files
                from grader.submissions.notebook.wording import in_cells

                notes = in_cells(result, graded.sources, notes, source=f"of {Path(submission).name}")
            result.extra.update(graded.to_dict())
            for line in [] if as_json else notes_for(notes, exercises):
                report.note(line)
        if extra.get("full"):
            from grader.cli.training import run_full

            result.extra["training"] = run_full(
                graded, data=data, steps=extra["steps"], quiet=as_json, plot=extra.get("curve")
            )
        if as_json:
            report.emit_json({**result.to_dict(), "sandbox": walls.to_dict()})
        else:
            report.emit_table(result, hints=hints)
        if extra.get("plot"):  # after the table: a missing matplotlib costs the picture, not the verdicts
            _plot(which, result, Path(extra["plot"]), data)
        sys.exit(0 if result.passed else 1)

    command.__doc__ = _GRADE_HELP[which]
    if which in ("ex1", "ex2"):
        command = click.option(
            "--plot",
            type=click.Path(dir_okay=False),
            default=None,
            help="Write a PNG: ex1, where each failing gradient differs; ex2, dlogits.",
        )(command)
    if which == "ex4":
        command = click.option("--full", is_flag=True, help="Also train the network with your backward only.")(command)
        command = click.option(
            "--steps",
            type=click.IntRange(min=1),
            default=200_000,
            show_default=True,
            help="Training steps for --full.",
        )(command)
        command = click.option(
            "--curve", type=click.Path(dir_okay=False), default=None, help="With --full, write the loss curve PNG here."
        )(command)
    return main.command(name=which)(command)


def _default_submission() -> str:
    """Return ./exercises, or stop with where grade looked and how to point it elsewhere."""
    if Path(DEFAULT_SUBMISSION).is_dir():
        return DEFAULT_SUBMISSION
    here = Path.cwd()
    raise click.UsageError(
        f"grade looks for your exercise files in ./{DEFAULT_SUBMISSION}, and there is no {DEFAULT_SUBMISSION}/ "
        f"folder in {here}. Run grade from the project folder (the one holding {DEFAULT_SUBMISSION}/), or say "
        f"where your files are: grade ... --submission PATH/TO/FOLDER."
    )


def _level(asked: str | None, policy) -> str:
    """Return the message level: the student's --level, at most a course.toml's level (which is also the default).

    Without a course.toml the default is diagnose and any level may be asked for.
    """
    if asked is None:
        return policy.level
    cap = policy.level if policy.source else LEVELS[-1]
    if LEVELS.index(asked) > LEVELS.index(cap):
        report.note(f"--level {asked}: this course's messages go up to {cap}, so they are shown at {cap}.")
        return cap
    return asked


def _say_missing_walls(quiet: bool, verbose: bool = False):
    """Say in one line which sandbox protections this platform lacks (the student's own code still runs); with
    verbose, each missing wall on a line of its own. Return the protections (--json carries them)."""
    from grader.sandbox import protections

    walls = protections()
    if quiet:
        return walls
    if walls.missing_minimum():
        report.note(
            f"sandbox ({walls.backend}): your own code runs without these walls here: "
            f"{'; '.join(walls.missing_minimum())} (fine for your own files; grade a class on Linux)"
        )
    elif walls.missing_extras():
        report.note(
            f"sandbox: {len(walls.missing_extras())} extra walls are off here; the allow-list holds (--verbose)"
        )
    if verbose:
        for wall in walls.missing_minimum():
            report.note(f"  missing (minimum): {wall}")
        for wall in walls.missing_extras():
            report.note(f"  missing (extra): {wall}")
        if not walls.missing():
            report.note(f"sandbox ({walls.backend}): every wall is up")
    return walls


def _plot(which: str, result, path: Path, data):
    from grader.show import plots

    wanted = ("passed", "failed") if which == "ex2" else ("failed",)
    pairs = [(i.id, i.value, i.truth) for i in result.items if i.status in wanted and i.value is not None]
    if not pairs:
        report.note(
            "--plot: ex2 returned no tensor to draw"
            if which == "ex2"
            else "--plot: nothing failed, so there is nothing to draw"
        )
        return
    try:
        if which == "ex2":
            plots.plot_dlogits(pairs[0][1], pairs[0][2], path)
        else:
            plots.plot_differences(pairs, path)
    except RuntimeError as exc:  # matplotlib is missing: plots.MISSING says how to install it
        report.note(f"--plot: no picture written; {exc}")
        return
    report.note(f"wrote {path}")


for _which in ("ex1", "ex2", "ex3", "ex4", "all"):
    _make_grade_command(_which)


ROOT = Path(__file__).resolve().parents[2]  # the source checkout: reference/ and exercises/ live here


@main.command(name="batch")
@click.argument("submissions", type=click.Path(exists=True, path_type=Path))  # a folder, or a class's .zip
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for gradebook.csv, students/, summary.json and report.html.",
)
@click.option("--jobs", "-j", type=int, default=2, show_default=True, help="Submissions graded at once.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per function call.")
@click.option("--memory", type=int, default=2048, show_default=True, help="MB each sandbox may allocate.")
@click.option("--resume", is_flag=True, help="Skip students whose files have not changed since the last run.")
@click.option(
    "--similarity/--no-similarity",
    default=True,
    show_default=True,
    help="Compare submissions function by function and list suspicious pairs.",
)
@click.option(
    "--canvas-assignment",
    default=None,
    metavar="NAME",
    help='The assignment column of canvas.csv, as Canvas names it: "Backprop ninja (12345)".',
)
@_data_option
@_course_option
@click.option(
    "--unsafe",
    is_flag=True,
    help="Grade even where the sandbox's minimum walls (the system-call allow-list, dropped capabilities, rlimits) "
    "cannot be put up. Without it such a run is refused.",
)
def batch_cmd(submissions, out, jobs, timeout, memory, resume, similarity, canvas_assignment, data, course, unsafe):
    """Grade every submission in SUBMISSIONS: folders, archives, notebooks, Canvas or Gradescope downloads."""
    from grader.classroom import early
    from grader.classroom.reports import EmptyClassError, detail_line

    policy = _policy(course, submissions)
    report.note(_policy_line(policy))
    try:  # the class found and its similarity check started before torch is imported, which takes a core a while
        started = early.start(submissions, policy.similarity_base, similarity)
    except (EmptyClassError, early.BatchNeedsLinux) as exc:
        raise click.ClickException(str(exc)) from exc
    from grader.classroom.batch import grade_batch
    from grader.cli import imports_done
    from grader.sandbox import Limits, jail

    imports_done()  # torch is imported: a Ctrl-C that its import swallowed ends the run here
    limits = Limits(timeout=timeout, memory_mb=memory)
    try:
        summary = grade_batch(
            submissions,
            out,
            jobs=jobs,
            limits=limits,
            resume=resume,
            data=data,
            policy=policy,
            similarity=similarity,
            canvas_assignment=canvas_assignment,
            unsafe=unsafe,
            early=started,
        )
    except jail.WallsMissing as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(report.batch_line(summary, out))
    report.note(detail_line(summary))
    if summary.get("grader_failed"):
        report.note(
            f"the grader failed on {len(summary['grader_failed'])} student(s), who have no score: "
            f"{', '.join(summary['grader_failed'][:10])}; run the same command with --resume to grade them again"
        )
        raise SystemExit(3)


def _policy_line(policy) -> str:
    """Say in one line which course policy a batch grades with (or that none was found)."""
    if not policy.source:
        return (
            "course policy: no course.toml found (give --course, or put one in or beside the folder): default "
            "points, level diagnose, and a random hidden geometry for this run only"
        )
    shown = policy.describe()
    return (
        f"course policy: {policy.source}: level {shown['level']}, points {shown['points'] or 'default'}, "
        f"secret {shown['secret']}, Gradescope {shown['visibility']}/{shown['hidden_visibility']}"
        + (f", late penalty {policy.late.text()}" if policy.late is not None else "")
    )


def _instructor_policy(course):
    """Return the policy of --course, else of ./course.toml, else the default."""
    from grader.spec.policy import FILENAME

    here = Path(FILENAME)
    return _policy(course if course is not None else (here if here.is_file() else None), None)


@main.command(name="warm")
@click.option("--stop", is_flag=True, help="Stop it now (it stops by itself after 10 idle minutes).")
def warm_cmd(stop):
    """Show or stop the warm process that lets `grade exN` skip importing torch (Linux)."""
    from grader.cli import warm

    if not warm.enabled():
        report.note(warm.off_line())
        return
    found = warm.status(stop=stop)
    for line in warm.status_lines(found, stopped=stop):
        report.note(line)


@main.command(name="release")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--course",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The course policy to ship, without its secret. Default: ./course.toml if there is one.",
)
def release_cmd(outdir, course):
    """Build the student bundle in OUTDIR: committed stubs and grader, never reference/ or the course secret."""
    from grader.ship import release

    try:
        path = release.build_release(outdir, ROOT, policy=_instructor_policy(course))
    except (FileExistsError, FileNotFoundError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(f"Student bundle written to {path}")


@main.command(name="gradescope")
@click.argument("out_zip", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--visibility",
    type=click.Choice(["hidden", "after_due_date", "after_published", "visible"]),
    default=None,
    help="Visibility of the summary and the lecture-geometry tests. Default: the course policy's (visible).",
)
@click.option(
    "--course",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The course policy (secret included) to grade with. Default: ./course.toml if there is one.",
)
@click.option(
    "--unsafe",
    is_flag=True,
    help="Let the autograder grade even where the sandbox's minimum walls cannot be put up (refused otherwise).",
)
def gradescope_cmd(out_zip, visibility, course, unsafe):
    """Build the Gradescope autograder zip OUT_ZIP."""
    from grader.ship import gradescope

    policy = _instructor_policy(course)
    try:
        path = gradescope.build_autograder_zip(out_zip, ROOT, visibility=visibility, policy=policy, unsafe=unsafe)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(f"Autograder zip written to {path}")


@main.command(name="prairielearn")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--course",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The course policy (secret included) to grade with. Default: ./course.toml if there is one.",
)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per function call.")
@click.option(
    "--deadline",
    type=float,
    default=100.0,
    show_default=True,
    help="Seconds one submission's whole grading may take; keep it below info.json's timeout.",
)
@click.option(
    "--unsafe",
    is_flag=True,
    help="Let the grader grade even where the sandbox's minimum walls cannot be put up (refused otherwise).",
)
def prairielearn_cmd(outdir, course, timeout, deadline, unsafe):
    """Write the PrairieLearn external grader into OUTDIR.

    OUTDIR gets serverFilesCourse/backprop_ninja/ (the grader, course.toml, run.sh) and PRAIRIELEARN.md (the image
    to build, the info.json lines).
    """
    from grader.ship import prairielearn

    policy = _instructor_policy(course)
    try:
        path = prairielearn.build_course_files(
            outdir, ROOT, policy=policy, unsafe=unsafe, timeout=timeout, deadline=deadline
        )
    except (FileExistsError, FileNotFoundError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(
        f"PrairieLearn course files written to {path}: copy serverFilesCourse/{prairielearn.FOLDER}/ into your "
        "course repository; PRAIRIELEARN.md says which image to build and what goes in info.json"
    )


_EXITS_AT_ONCE = [False]  # run(): this process ends with os._exit as soon as the command returns
BEFORE_EXIT: list = []  # run(): called with the exit status once all is flushed, just before os._exit (warm.py)


def run():
    """Run `grade` and leave without tearing torch down: flush, run exit handlers, then exit at once."""
    import atexit
    import gc
    import os
    import signal

    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))  # unwind: sandboxes stopped, jail removed
    gc.freeze()  # torch's ~1M objects live to the end: one full collection of them costs ~70 ms and frees nothing
    _EXITS_AT_ONCE[0] = True  # the last sandbox and the truth's helper end on their own: nothing waits for them
    try:
        main.main(prog_name="grade")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            click.echo(str(exc.code), err=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is done: a late Ctrl-C would only break a handler below
    _keep_torch_registrations()
    atexit._run_exitfuncs()  # e.g. removing the sandbox's jail folder; then skip the ~0.4 s of interpreter teardown
    from grader.sandbox import jail

    jail.flush_standard_streams()
    for hook in BEFORE_EXIT:
        hook(code)
    os._exit(code)


def _keep_torch_registrations() -> None:
    """Keep torch's operator libraries from unregistering their kernels one by one at exit (a weakref finalizer each,
    134 of them: ~16 ms of `grade ex1`), just before os._exit ends the process anyway. Every other exit handler runs."""
    import weakref

    undo = getattr(sys.modules.get("torch.library"), "_del_library", None)
    if undo is None:
        return
    for finalizer in list(getattr(weakref.finalize, "_registry", ())):
        if (finalizer.peek() or (None, None))[1] is undo:
            finalizer.atexit = False
