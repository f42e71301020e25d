"""`check()` in Jupyter, JupyterLab, Colab or IPython: grade the cells this kernel has run, and show the table.

The cells come from IPython's own input history, go through the same converter as an .ipynb file and run in the
same sandbox child as any submission. Nothing in the kernel changes: not its globals, not torch's thread count,
not its backward kernels (hooked for the sandboxes while grading).
"""

from __future__ import annotations

import io
import sys
import types

from grader.spec import catalogue
from grader.submissions.notebook import messages as msg


def _exercises(exercise: str | None) -> tuple[str, ...]:
    if exercise is None or exercise == "all":
        return catalogue.EXERCISES
    if exercise in catalogue.EXERCISES:
        return (exercise,)
    raise ValueError(msg.CHECK_UNKNOWN.format(what=exercise))


def kernel_history() -> tuple[list[str], list[int]]:
    """Return the inputs this kernel has run, with their execution numbers."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "history_manager", None) is None:
        raise RuntimeError(msg.CHECK_OUTSIDE)
    raw = list(shell.history_manager.input_hist_raw)
    numbers = [k for k in range(1, len(raw)) if raw[k].strip()]
    return [raw[k] for k in numbers], numbers


def _plots(exercises, result, data):
    """Return PNG bytes of the heat maps (ex1) or the dlogits picture (ex2), or a note why there is none."""
    from grader.show import plots

    buf = io.BytesIO()
    if exercises == ("ex2",):
        pairs = [(i.id, i.value, i.truth) for i in result.items if i.exercise == "ex2" and i.value is not None]
        if pairs:
            plots.plot_dlogits(pairs[0][1], pairs[0][2], buf)
            return buf.getvalue()
        return msg.CHECK_NO_PLOT
    pairs = [(i.id, i.value, i.truth) for i in result.items if i.status == "failed" and i.value is not None]
    if not pairs:
        return msg.CHECK_NO_PLOT
    plots.plot_differences(pairs, buf)
    return buf.getvalue()


def _course(course) -> tuple:
    """Return (policy, the course.toml it came from or None): course, else one in or above the working folder.

    In Jupyter the working folder is the notebook's: the released bundle's course.toml sits beside
    backprop_ninja.ipynb. Then beside the grader package itself (the bundle's folder, installed with -e).
    """
    from pathlib import Path

    from grader.spec.policy import FILENAME, Policy, find, load

    if course is not None:
        return load(course), Path(course)
    found = find(Path.cwd(), inside=True)
    if found is None:
        beside = Path(__file__).resolve().parents[2] / FILENAME
        found = beside if beside.is_file() else None
    return (load(found), found) if found is not None else (Policy(), None)


def check(
    exercise: str | None = None,
    *,
    plot: bool = False,
    data: str | None = None,
    timeout: float = 10.0,
    course: str | None = None,
):
    """Grade the exercise cells run in this kernel ('ex1' .. 'ex4', or all) and display the table inline.

    course: a course.toml whose points and message level to use; by default the one in the notebook's folder
    (or the folder above it), else the grader's own points.
    """
    import torch
    from IPython.display import Image, Markdown, display

    from grader.grading.runner import grade
    from grader.sandbox import Limits
    from grader.show.notebook import CheckReport
    from grader.spec.policy import grade_kwargs
    from grader.submissions.notebook import history_sources
    from grader.submissions.notebook.submission import notes_for
    from grader.submissions.notebook.wording import in_cells
    from grader.submissions.sources import Submission

    exercises = _exercises(exercise)
    inputs, numbers = kernel_history()
    policy, found = _course(course)
    sources, notes = history_sources(inputs, numbers)
    notes = notes_for(notes, exercises)
    threads = torch.get_num_threads()
    try:
        result = grade(
            Submission("notebook", sources, notes),
            exercises,
            data=data,
            limits=Limits(timeout=timeout),
            **grade_kwargs(policy),
        )
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        from grader.sandbox import child

        child.unhook_backward_kernels()  # torch's own backward kernels, hooked for the sandboxes forked here
    notes = in_cells(result, sources, notes) + ([msg.CHECK_COURSE.format(path=found)] if found else [])
    display(CheckReport(result, notes))
    if plot:
        picture = _plots(exercises, result, data)
        display(Image(data=picture, format="png") if isinstance(picture, bytes) else Markdown(picture))


class _CallableModule(types.ModuleType):
    """Let `from grader import check` work even when it finds this module rather than the function."""

    def __call__(self, *args, **kwargs):
        return check(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
