"""Entry points: the `grade` command, `grade ex4 --full` training, and Jupyter's check()."""

import os
import signal
import sys

STUDENT_COMMANDS = ("ex1", "ex2", "ex3", "ex4", "all")
_AHEAD: list = []  # the sandbox child `grade exN` forked as soon as torch was imported (fork backend), until taken


ABORTED = "Aborted!"  # what click says for a Ctrl-C once the command runs; said for one before it, too
_INTERRUPTED: list = []  # a Ctrl-C noted while the command starts (see _note_interrupt)
_NOTING: list = []  # the Ctrl-C handler to put back once the command has imported torch (see imports_done)


def run():
    """Run the `grade` command (the console script `grade = grader.cli:run`)."""
    # numpy's OpenBLAS, imported with torch, starts a thread per core that spins ~0.1 s of CPU waiting for work the
    # grader never gives it; one thread starts none (a user's own setting is kept)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    argv = sys.argv[1:]
    command = argv[0] if argv and not {"-h", "--help"} & set(argv) else None
    student = command in STUDENT_COMMANDS
    # a student command, or `grade batch` (which calls imports_done() once it has imported torch); an ignored Ctrl-C
    # (nohup) stays ignored; a warm process's worker notes from its start (warm._run_worker)
    if (student or command == "batch") and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        _INTERRUPTED.clear()
        _NOTING.append(signal.signal(signal.SIGINT, _note_interrupt))
    if student:
        _served_warm(argv)
        from grader.sandbox import prespawn  # imports no torch: on a laptop the sandbox imports it meanwhile

        if not prespawn.start(modules=("grader.training.served",) if "--full" in argv else ()):
            _fork_ahead(argv)
        import torch  # noqa: F401 - here, where a Ctrl-C is noted (the fork backend has imported it already)
    from grader.cli.main import run as main

    try:
        if student:
            imports_done()
        main()
    except KeyboardInterrupt:  # a Ctrl-C in the instant its handler changes hands, outside click's: as click says
        _aborted()


def _served_warm(argv: list[str]) -> None:
    """Have a warm process run this student command, and end with its status; else note one to start (warm.py)."""
    from grader.cli import warm

    if not warm.enabled():
        return
    try:
        code = warm.client(argv, _INTERRUPTED)
    except Exception:  # noqa: BLE001 - whatever fails on the way (a working folder since removed, say), grade here
        code = 1 if warm.handed_over() else None  # unless a worker has the run: never graded twice
    if code is not None:
        os._exit(code)  # the worker wrote to this process's streams itself: nothing here is buffered
    if warm.noted():
        import atexit

        atexit.register(warm.start_noted)  # registered first: runs last, once the run's sandboxes are stopped


def imports_done() -> None:
    """Stop noting Ctrl-C, now that the command has imported torch; end the run if one came meanwhile."""
    while _NOTING:
        signal.signal(signal.SIGINT, _NOTING.pop())
    if _INTERRUPTED:
        _INTERRUPTED.clear()  # said once: a process that runs the command again (a test, say) starts afresh
        _aborted()


def _aborted() -> None:
    """Say "Aborted!" as click does for a Ctrl-C, and end with status 1; exit handlers run (a child forked ahead is
    stopped)."""
    if sys.stderr is not None:  # None when fd 2 was closed as the process started
        sys.stderr.write(f"\n{ABORTED}\n")
    sys.exit(1)


def _note_interrupt(sig, frame) -> None:
    """Note a Ctrl-C while the command starts, for imports_done() to end it once torch is imported; a second ends it.

    Raised as KeyboardInterrupt inside torch's import, one was swallowed there (numpy left half-built, the run going
    on to blame the student's code), or came out as an ImportError, an "Exception ignored" or an abort.
    """
    if _INTERRUPTED:
        os.write(2, f"\n{ABORTED}\n".encode())
        os._exit(1)  # the children forked ahead die with this process (their parent-death signal)
    _INTERRUPTED.append(sig)


def _fork_ahead(argv: list[str]) -> None:
    """Fork the truth server and the sandbox child now, once torch and the child's own modules are imported, before
    the rest of the grader is. The server builds the lecture's truth, the child warms up and puts up its walls,
    while this process imports and reads the submission. Neither holds anything of the submission or the course:
    neither exists yet. The grade command takes the child (take_ahead); unused, it is stopped at exit. The server
    builds the truth of the submission's hidden geometries when asked, and ends with this process.
    """
    import atexit

    from grader.sandbox import Limits, Worker
    from grader.truth import server

    if _INTERRUPTED:  # a Ctrl-C while torch was imported: fork nothing
        return
    # from here on a child exists: a TERM unwinds (the child stopped, the jail removed), as once grading runs
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    try:
        server.serve(ahead=_lecture_keys(argv))  # first: the sandbox's pipes are not the server's to hold
    except OSError:  # no fork here now: a helper is forked for the truth later, as without a server
        pass
    try:
        _AHEAD.append(Worker(Limits(), warm_here=False))  # a student command's limits (its --timeout aside)
    except OSError:  # no fork here now: the grade command forks its own, and says why if that fails too
        return
    atexit.register(_stop_ahead)  # after the jail's own exit handler, so it runs before it


def _lecture_keys(argv: list[str]) -> list:
    """Return the fixture keys of the lecture's geometries a student command grades on (none with --data)."""
    from grader.spec import EXERCISES, catalogue

    if any(a == "--data" or a.startswith("--data=") for a in argv):
        return []
    calls = catalogue.select(EXERCISES if argv[0] == "all" else (argv[0],))
    return list(dict.fromkeys((catalogue.graded_geometry(c), None, c.ex4) for c in calls))


def take_ahead():
    """Return the sandbox child forked ahead (a Worker), or None: the caller owns it from then on."""
    return _AHEAD.pop() if _AHEAD else None


def _stop_ahead() -> None:
    while _AHEAD:
        _AHEAD.pop().close()
