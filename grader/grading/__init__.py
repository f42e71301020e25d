"""Grading one submission: run it in sandboxes, compare with the truth, recognise the traps, keep the results."""
