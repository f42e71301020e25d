"""What is graded: the items and their points, the course policy, and what a stub is."""
