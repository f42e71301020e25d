"""What leaves the instructor's machine: the student bundle, its notebook, and the Gradescope autograder."""
