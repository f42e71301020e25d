"""What a forked sandbox child must forget, and the extra requests it can serve: both registered from above.

The sandbox knows nothing of grading. A module that holds a secret (the course's Policy, the run's key, the
allowed errors of the truths) registers a function that wipes it; a module that needs a request of its own in
the child (training) registers a handler. Both are registered in the parent, before any child forks, and a
child runs every wipe before anything else.
"""

from __future__ import annotations

from collections.abc import Callable

_WIPES: list[Callable[[], None]] = []
_HANDLERS: dict[str, Callable] = {}


def on_fork_forget(wipe: Callable[[], None]) -> Callable[[], None]:
    """Register a function that wipes a secret in a sandbox child's copy of memory; return it (a decorator)."""
    if wipe not in _WIPES:
        _WIPES.append(wipe)
    return wipe


def forget_all() -> None:
    """Run every registered wipe: in a child, before its walls go up and before any student code."""
    for wipe in _WIPES:
        wipe()


def serve(op: str, handler: Callable) -> None:
    """Let a child answer requests of kind `op` with handler(server, request) -> (header, blob)."""
    _HANDLERS[op] = handler


def handler_modules() -> list[str]:
    """Return the modules whose import registers the handlers: a spawned child (a fresh interpreter) imports them."""
    return sorted({h.__module__ for h in _HANDLERS.values()})


def handler(op: str) -> Callable | None:
    """Return the handler registered for a request kind, or None."""
    return _HANDLERS.get(op)
