"""Entry points: the `grade` command, `grade ex4 --full` training, and Jupyter's check()."""

import sys

STUDENT_COMMANDS = ("ex1", "ex2", "ex3", "ex4", "all")
_AHEAD: list = []  # the sandbox child `grade exN` forked as soon as torch was imported (fork backend), until taken


def run():
    """Run the `grade` command (the console script `grade = grader.cli:run`)."""
    argv = sys.argv[1:]
    if argv and argv[0] in STUDENT_COMMANDS and not {"-h", "--help"} & set(argv):
        from grader.sandbox import prespawn  # imports no torch: on a laptop the sandbox imports it meanwhile

        if not prespawn.start(modules=("grader.training.served",) if "--full" in argv else ()):
            _fork_ahead()
    from grader.cli.main import run as main

    main()


def _fork_ahead() -> None:
    """Fork the sandbox child now, once torch and the child's own modules are imported, before the rest of the
    grader is: it warms up and puts up its walls while this process imports, reads the submission and forks the
    truth's helper. It holds nothing of the submission, the course or the truth: none of them exists yet. The grade
    command takes it (take_ahead); unused, it is stopped at exit.
    """
    import atexit
    import signal

    from grader.sandbox import Limits, Worker

    # from here on a child exists: a TERM unwinds (the child stopped, the jail removed), as once grading runs
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    try:
        _AHEAD.append(Worker(Limits(), warm_here=False))  # a student command's limits (its --timeout aside)
    except OSError:  # no fork here now: the grade command forks its own, and says why if that fails too
        return
    atexit.register(_stop_ahead)  # after the jail's own exit handler, so it runs before it


def take_ahead():
    """Return the sandbox child forked ahead (a Worker), or None: the caller owns it from then on."""
    return _AHEAD.pop() if _AHEAD else None


def _stop_ahead() -> None:
    while _AHEAD:
        _AHEAD.pop().close()
