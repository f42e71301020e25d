"""The exercises: which functions a student writes, what each may ask for, and what each item is worth."""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from grader.sandbox import forget
from grader.spec import EXERCISES, SHORTCUT_GRADS
from grader.truth import names

if TYPE_CHECKING:
    from grader.truth import fixture


@cache
def _fixture():
    """Return grader.truth.fixture, imported on first use: reading the catalogue (a course.toml's [points], before
    `grade batch` starts its similarity check) must not import torch."""
    from grader.truth import fixture

    return fixture


@dataclass(frozen=True)
class Item:
    """One graded gradient (or the training check): an id like 'ex1.dC' and its points."""

    exercise: str
    name: str  # 'dC', 'dlogits', 'training'
    points: float = 1.0

    @property
    def id(self) -> str:
        return f"{self.exercise}.{self.name}"

    @property
    def var(self) -> str:
        """Return the variable whose gradient this item is ('C' for dC)."""
        return self.name[1:]


@dataclass(frozen=True)
class Call:
    """One student function and the items its return value is graded as.

    kind: 'tensor' (returns one gradient), 'dict' (ex4.backward: returns d<param> for every parameter),
    'training' (ex4.backward called on consecutive SGD steps).
    grads: the true gradients this function may ask for, on top of the forward tensors and parameters.
    """

    exercise: str
    function: str
    items: tuple[Item, ...]
    kind: str = "tensor"
    grads: tuple[str, ...] = ()

    @property
    def ex4(self) -> bool:
        return self.exercise == "ex4"


def _ex1_calls() -> tuple[Call, ...]:
    calls = []
    for k, var in enumerate(names.EX1_ORDER):
        name = "d" + var
        calls.append(Call("ex1", name, (Item("ex1", name),), grads=tuple("d" + v for v in names.EX1_ORDER[:k])))
    return tuple(calls)


CALLS: dict[str, tuple[Call, ...]] = {
    "ex1": _ex1_calls(),
    "ex2": (Call("ex2", "dlogits", (Item("ex2", "dlogits", 2.0),), grads=SHORTCUT_GRADS["ex2"]),),
    "ex3": (Call("ex3", "dhprebn", (Item("ex3", "dhprebn", 4.0),), grads=SHORTCUT_GRADS["ex3"]),),
    "ex4": (
        Call("ex4", "backward", tuple(Item("ex4", g) for g in names.EX4_GRADS), kind="dict"),
        Call("ex4", "backward", (Item("ex4", "training", 3.0),), kind="training"),
    ),
}


def items(exercises=EXERCISES) -> list[Item]:
    """Return every item of the given exercises, in backprop order."""
    return [item for ex in exercises for call in CALLS[ex] for item in call.items]


def select(exercises, only=None) -> list[Call]:
    """Return the calls of the exercises, keeping only those whose function or item matches `only`."""
    calls = [call for ex in exercises for call in CALLS[ex]]
    if not only:
        return calls
    wanted = set(only)
    return [c for c in calls if c.function in wanted or any(i.id in wanted or i.name in wanted for i in c.items)]


@dataclass
class Draw:
    """What draws a submission's hidden geometries: the course secret (None: this run's random key) and the digest
    of the submission's files, so that each submission gets its own. Passed down, never kept in module state.
    """

    secret: str | None = None
    submission: bytes = b""

    def __post_init__(self):
        _LIVE.add(self)

    def __hash__(self) -> int:  # held in a WeakSet: identity, not value
        return id(self)

    @classmethod
    def of(cls, secret: str | None, sources: dict) -> Draw:
        """Return the draw for a course secret and a submission's files ({exercise: Source})."""
        h = hashlib.sha256()
        for ex in sorted(sources):
            h.update(f"{ex}\0{len(sources[ex].text)}\0".encode() + sources[ex].text.encode("utf-8", "surrogatepass"))
        return cls(secret, h.digest())


_LIVE: weakref.WeakSet = weakref.WeakSet()  # every Draw alive: a sandbox child's copies are wiped


@forget.on_fork_forget
def _forget_draws() -> None:
    """A sandbox child needs neither the secret nor the submission's digest: together they draw the hidden geometry.

    A child inherits its parent's call stack, and a frame up that stack holds the Draw being graded.
    """
    for draw in list(_LIVE):
        draw.secret, draw.submission = None, b""


# Each exercise draws a hidden geometry of its own. One sandbox child grades all of a submission's exercises, so
# no exercise may be given, on its hidden geometry, another's answer as an input, nor what determines it: Ex1's
# calls receive the true dlogits (Ex2's answer), dhprebn (Ex3's) and, for dC, dW1 ... dbnbias (Ex4's); Ex3's call
# receives the true dhpreact, an Ex1 answer from which Ex2's dlogits follows by least squares through W2 (found by
# a red-team helper: within 1.7e-9). On geometries of their own none of that is worth anything.
HIDDEN_GROUP = {"ex2": b"|ex2", "ex3": b"|ex3", "ex4": b"|ex4"}


def graded_geometry(call: Call) -> fixture.Geometry:
    """Return the lecture's geometry a call is graded on (shared by every student)."""
    return _fixture().EX4_PRIMARY if call.ex4 else _fixture().PRIMARY


def geometries(call: Call, draw: Draw | None) -> tuple[fixture.Geometry, ...]:
    """Return the (graded, hidden second) geometry of a call; only the graded one when draw is None."""
    if draw is None:
        return (graded_geometry(call),)
    hidden = _fixture().hidden_geometry(draw.secret, draw.submission + HIDDEN_GROUP.get(call.exercise, b""))
    return graded_geometry(call), hidden


def build_fixture(call: Call, geometry: fixture.Geometry, data: str | None) -> fixture.Fixture:
    """Return the fixture a call is graded on in one geometry."""
    return _fixture().build(geometry, data, ex4=call.ex4)


def build_fixtures(calls, data: str | None, draw: Draw | None, started=None, wait: bool = True, run=None) -> None:
    """Build every fixture these calls are graded on, in both geometries, the truth in a helper process.

    draw: what draws the hidden geometries; None builds only the graded geometry (a batch's, shared by every
    student; each hidden one is not). started: what start_fixtures() returned, if the helper was forked earlier.
    wait=False: do not wait for the helper to finish ending once its truth is read (see truth.server.finish).
    run: the exercises that will run (None: all); the others need only the graded geometry (their items' shapes).
    """
    from grader.truth import server as prebuild

    keys = _keys(calls, data, draw, run)
    prebuild.finish(started if started is not None else prebuild.start(keys), wait)  # none on this heap
    for g, _, ex4 in keys:
        _fixture().build(g, data, ex4=ex4)


def start_fixtures(calls, data: str | None, draw: Draw | None, run=None):
    """Fork the helper that builds these calls' truth; build_fixtures(..., started=) collects it."""
    from grader.truth import server as prebuild

    return prebuild.start(_keys(calls, data, draw, run))


def _keys(calls, data: str | None, draw: Draw | None, run) -> list[tuple]:
    """Return the fixture keys of these calls: both geometries where the exercise runs, else the graded one."""
    keys = [(g, data, c.ex4) for c in calls for g in geometries(c, draw if run is None or c.exercise in run else None)]
    return list(dict.fromkeys(keys))


def available(call: Call, fx: fixture.Fixture) -> list[str]:
    """Return every name the call's function may ask for."""
    return [*fx.inputs(), *call.grads]
