"""What a student sees: the terminal table, the notebook table, and the plots."""
