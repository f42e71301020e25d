"""A whole class: `grade batch`, its process pool, deadlines, and its output files."""
