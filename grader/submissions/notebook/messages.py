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

# notes: what was graded and what was skipped
GRADED = "{exercise}: graded {label} ({what})"
NOT_FOUND = "{exercise}: no cell assigns {names} (a placeholder `= None` does not count)"
SYNTAX = "{where}: not valid Python ({error}), so the cell was skipped"
SYNTAX_EXERCISE = "{exercise}: {where} is not valid Python, so the exercise cannot run until it is fixed"
UNREADABLE = "the notebook could not be read: {error}"
UNPLACED = "{exercise}: {count} gradient function(s) could not be built from the cells; see their error items"

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
