"""`python -m grader.gradescope`, as autograders built before the move to grader/ship/ still call it."""

from grader.ship.gradescope import main

if __name__ == "__main__":
    main()
