"""What is graded: the items and their points, the course policy, and what a stub is.

The names below stand apart from the catalogue: reading a submission needs them, not the exercises' calls.
"""

EXERCISES = ("ex1", "ex2", "ex3", "ex4")
SHORTCUT_GRADS = {"ex2": (), "ex3": ("dhpreact",)}  # the true gradients Ex2's and Ex3's one call may ask for
