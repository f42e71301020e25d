"""The `grade` command: a thin click layer over runner, batch, release and gradescope."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader import catalogue, report

_GRADE_HELP = {
    "ex1": "Grade Ex1: the 26 atomic gradients, dlogprobs back to dC.",
    "ex2": "Grade Ex2: dlogits through the cross-entropy shortcut.",
    "ex3": "Grade Ex3: dhprebn through the BatchNorm shortcut.",
    "ex4": "Grade Ex4: the compact backward pass, one step and several SGD steps.",
    "all": "Grade all four exercises.",
}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Grade hand-derived backpropagation (makemore part 4) against autograd."""


def _data_option(f):
    return click.option(
        "--data",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="Names corpus, one name per line (the lecture's names.txt). Default: the census names.",
    )(f)


def _make_grade_command(which: str):
    exercises = catalogue.EXERCISES if which == "all" else (which,)

    @click.option(
        "--submission",
        "-s",
        type=click.Path(file_okay=False),
        default="exercises",
        show_default=True,
        help="Folder holding ex1.py .. ex4.py.",
    )
    @click.option("--only", multiple=True, metavar="NAME", help="Grade only this function or item (repeatable).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
    @click.option("--hints", is_flag=True, help="Explain each trap at length.")
    @click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds per function call.")
    @_data_option
    def command(submission, only, as_json, hints, timeout, data, **extra):
        from grader.runner import grade
        from grader.sandbox import Limits

        if only:
            known = {i.name for i in catalogue.items(exercises)} | {i.id for i in catalogue.items(exercises)}
            unknown = [o for o in only if o not in known and o != "backward"]
            if unknown:
                raise click.BadParameter(f"{', '.join(unknown)} is not an item of {which}", param_hint="--only")
        if not Path(submission).is_dir():
            raise click.BadParameter(f"{submission} is not a folder", param_hint="--submission")
        result = grade(Path(submission), exercises, only=only or None, data=data, limits=Limits(timeout=timeout))
        if extra.get("plot"):
            _plot(which, result, Path(extra["plot"]), data)
        if extra.get("full"):
            from grader.training_cli import run_full

            result.extra["training"] = run_full(
                Path(submission), data=data, steps=extra["steps"], quiet=as_json, plot=extra.get("curve")
            )
        if as_json:
            report.emit_json(result.to_dict())
        else:
            report.emit_table(result, hints=hints)
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
            "--steps", type=int, default=200_000, show_default=True, help="Training steps for --full."
        )(command)
        command = click.option(
            "--curve", type=click.Path(dir_okay=False), default=None, help="With --full, write the loss curve PNG here."
        )(command)
    return main.command(name=which)(command)


def _plot(which: str, result, path: Path, data):
    from grader import plots

    wanted = ("passed", "failed") if which == "ex2" else ("failed",)
    pairs = [(i.id, i.value, i.truth) for i in result.items if i.status in wanted and i.value is not None]
    if which == "ex2":
        if not pairs:
            report.note("--plot: ex2 returned no tensor to draw")
            return
        plots.plot_dlogits(pairs[0][1], pairs[0][2], path)
    else:
        if not pairs:
            report.note("--plot: nothing failed, so there is nothing to draw")
            return
        plots.plot_differences(pairs, path)
    report.note(f"wrote {path}")


for _which in ("ex1", "ex2", "ex3", "ex4", "all"):
    _make_grade_command(_which)


ROOT = Path(__file__).resolve().parent.parent  # the source checkout: reference/ and exercises/ live here


@main.command(name="batch")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
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
@_data_option
def batch_cmd(submissions, out, jobs, timeout, memory, resume, data):
    """Grade every submission (a folder or .zip per student) in SUBMISSIONS."""
    from grader.batch import grade_batch
    from grader.sandbox import Limits

    summary = grade_batch(
        submissions, out, jobs=jobs, limits=Limits(timeout=timeout, memory_mb=memory), resume=resume, data=data
    )
    report.note(report.batch_line(summary, out))


@main.command(name="release")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
def release_cmd(outdir):
    """Build the student bundle in OUTDIR: stubs and grader, never reference/."""
    from grader import release

    try:
        path = release.build_release(outdir, ROOT)
    except (FileExistsError, FileNotFoundError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(f"Student bundle written to {path}")


@main.command(name="gradescope")
@click.argument("out_zip", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--visibility",
    type=click.Choice(["hidden", "after_due_date", "after_published", "visible"]),
    default="visible",
    show_default=True,
)
def gradescope_cmd(out_zip, visibility):
    """Build the Gradescope autograder zip OUT_ZIP."""
    from grader import gradescope

    try:
        path = gradescope.build_autograder_zip(out_zip, ROOT, visibility=visibility)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    report.note(f"Autograder zip written to {path}")
