"""Every sentence the notebook converter and check() show a student, in one place."""

# what could not be placed: raised as NotebookError by the generated function, so exactly that item errors
TWO_AT_ONCE = (
    "{where}: `{code}` assigns {names} in one statement. Each gradient is graded from its own statements, so "
    "give each one its own line (`{first} = ...`)."
)
UPDATE_FIRST = (
    "{where}: `{code}` updates {name}, but no statement before it assigns {name}. Start with `{name} = ...` "
    "(for example `{name} = torch.zeros_like(...)`)."
)
TOO_MANY_HELPERS = (
    "{where}: `{name}` needs more than {count} other statements to be computed; the grader stops there. Keep each "
    "gradient's computation to the statements it needs."
)
UNDEFINED = (
    "{where}: `{code}` uses `{name}`, which nothing in the exercise defines. The grader gives forward tensors, "
    "parameters, Xb, Yb, n and earlier gradients by name; anything else must be computed in the exercise's cells."
)
OUTSIDE = (
    "{where}: `{code}` uses `{name}`, which is defined in {other}, outside the exercise. Only the exercise's "
    "statements are graded, so compute it there, or take the size from n or from a tensor's .shape."
)
BLOCKED = (
    "{where}: `{code}` uses `{name}`, imported from {module}, which the grader's sandbox does not allow. "
    "Use torch, torch.nn.functional or math."
)
NO_ASSIGN = (
    "{where}: `{code}` reads `{name}` inside the training loop, but no statement of the manual backprop assigns "
    "it. Compute every gradient in the loop, from logits down to dC."
)

# an exercise whose cell is not Python: raised when its code loads, so its items error once, naming the line
BROKEN_CELL = (
    "{at} is not valid Python ({error}), so {exercise} could not be graded. Fix that line and run the cell again."
)
BROKEN_AT_LINE = "{where}: `{code}`"  # {at} above when the line is known

# notes: what was graded and what was skipped
GRADED = "{exercise}: graded {label} ({what})"
NOT_FOUND = "{exercise}: no cell assigns {names} (a placeholder `= None` does not count)"
SYNTAX = "{where}: not valid Python ({error}), so the cell was skipped"
UNREADABLE = "the notebook could not be read: {error}"
UNPLACED = "{exercise}: {count} gradient function(s) could not be built from the cells; see their error items"
# the order cells are graded in, when it is not the order they ran
FILE_ORDER = (
    "cells ran out of order: In [{above}] ({above_cell}) above In [{below}] ({below_cell}); graded top to bottom"
)
KERNEL_ORDER = (
    "cells ran out of order: {late} ({late_exercise}) ran after {early} ({early_exercise}), which sits below it; "
    "graded in the order this kernel ran them, In [1] first, a later run replacing an earlier one (not top to bottom)"
)

WANTED = {
    "ex1": "any of dlogprobs .. dC",
    "ex2": "dlogits",
    "ex3": "dhprebn",
    "ex4": "dC, dW1, db1, dW2, db2, dbngain and dbnbias in a training loop",
}

# grade exN --submission PATH
NO_SUCH_SUBMISSION = "{path} does not exist"
NOT_A_SUBMISSION = "{path} is not a folder, an archive or a notebook (.ipynb)"
NOTEBOOK_GRADED = "No ex1.py .. ex4.py were found, so the notebook {name} was graded:"

# check()
CHECK_UNKNOWN = "check() takes 'ex1', 'ex2', 'ex3', 'ex4' or nothing (all four); got {what!r}"
CHECK_OUTSIDE = (
    "check() grades the cells run in a Jupyter, Colab or IPython kernel; outside one, run "
    "`grade ex1 --submission your_notebook.ipynb`"
)
CHECK_NO_PLOT = "Nothing to draw: no gradient failed."
CHECK_COURSE = "points and message level as {path} sets them"
# check(): the grader's words for what is missing, said of cells rather than of exercise files
IN_KERNEL = "run in this kernel"  # {source} below
NOT_RUN = (
    "No cell {source} assigns {names} yet (a placeholder `= None` does not count): write them in the "
    "Exercise {number} cell and run it."
)
GRADIENT_NOT_RUN = "No cell {source} assigns {name} yet (a placeholder `= None` does not count)."
CELLS_OF = "the {exercise} cells"  # what stands for an exercise file in any other message of the grader's
