"""Entry points: the `grade` command, `grade ex4 --full` training, and Jupyter's check()."""


def run():
    """Run the `grade` command (the console script `grade = grader.cli:run`)."""
    from grader.cli.main import run as main

    main()
