"""Entry points: the `grade` command, `grade ex4 --full` training, and Jupyter's check()."""

import sys

STUDENT_COMMANDS = ("ex1", "ex2", "ex3", "ex4", "all")


def run():
    """Run the `grade` command (the console script `grade = grader.cli:run`)."""
    argv = sys.argv[1:]
    if argv and argv[0] in STUDENT_COMMANDS and not {"-h", "--help"} & set(argv):
        from grader.sandbox import prespawn  # imports no torch: on a laptop the sandbox imports it meanwhile

        prespawn.start(modules=("grader.training.served",) if "--full" in argv else ())
    from grader.cli.main import run as main

    main()
