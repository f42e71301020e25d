"""A notebook's result in the words of cells: what the runner says of exercise files, said of cells instead.

The runner grades every submission alike and names what is missing or broken after the exercise files
(`ex1.py`). A notebook student has cells, not files: this rewrites those messages of a graded result in place,
without touching its verdicts or points. It reads the result as the runner's `SubmissionResult` has it (items
with `exercise`, `name`, `status`, `scope` and `message`; `problems` as dicts), since the grading layer sits above
this one.
"""

from __future__ import annotations

import re

from grader.submissions.notebook import messages as msg
from grader.submissions.sources import Source


def _defines(source: Source, function: str) -> bool:
    """Return whether an exercise's converted code defines a function of that name at its top level."""
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(function)}\s*\(", source.text, re.MULTILINE) is not None


def in_cells(result, sources: dict[str, Source], notes: list[str], *, source: str = msg.IN_KERNEL) -> list[str]:
    """Rewrite a notebook result's messages in terms of cells; return the notes the table does not already say.

    source: which cells were read, for "No cell {source} assigns ...": run in this kernel, or of a notebook file.
    """
    said = set()
    for item in result.items:
        ex = item.exercise
        function = "backward" if ex == "ex4" else item.name
        if item.status == "not_attempted" and ex not in sources:  # no cell gives the exercise at all
            item.message = msg.NOT_RUN.format(source=source, names=msg.WANTED[ex], number=ex[2:])
            said.add(ex)
        elif item.status == "not_attempted" and item.scope == "item" and not _defines(sources[ex], function):
            name = msg.WANTED[ex] if ex == "ex4" else item.name
            item.message = msg.GRADIENT_NOT_RUN.format(source=source, name=name)
        else:  # anything else the runner says of the exercise's file
            label = sources[ex].label if ex in sources and sources[ex].label else msg.CELLS_OF.format(exercise=ex)
            item.message = item.message.replace(f"{ex}.py", label)
    by_id = {item.id: item for item in result.items}
    for problem in result.problems:  # said once above the table: under the exercise's name, not a file's
        problem["file"] = problem["exercise"]
        problem["message"] = by_id[problem["items"][0]].message
    missing = {msg.NOT_FOUND.format(exercise=ex, names=msg.WANTED[ex]) for ex in said}
    return [n for n in notes if n not in missing]
