"""Ex4's full training run: SGD with the student's backward alone."""
