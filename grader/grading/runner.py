"""Grade one submission: run its functions in a sandbox, then judge every item in this (trusted) process."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from grader import sandbox
from grader.grading import compare as cmp
from grader.grading import scan as internals
from grader.grading import traps
from grader.grading.results import ItemResult, SubmissionResult
from grader.sandbox import MALFORMED, Limits, Worker, arena, jail, reap, wire, zygote
from grader.sandbox.wire import Opaque, Returned, WireError
from grader.sandbox.worker import Reply
from grader.spec import catalogue
from grader.spec import parse as bounded
from grader.spec.policy import Policy
from grader.submissions.sources import Source, Submission
from grader.truth import fixture

MAX_SOURCE_BYTES = 1 << 20
WROTE_TO_PIPE = (
    "Only what a function returns reaches the grader: return the gradient tensor, and do not write to file "
    "descriptors or reach into the grader's modules."
)
PROCESS_ENDED = (
    "Look for code that ends or crashes the process (sys.exit, os._exit, ctypes, a signal); the other items "
    "were graded as usual."
)
TORCH_NOT_IMPLEMENTED = (
    "torch has no such operation for these tensors (sparse, meta or a subclass, say): compute the gradient on a "
    "plain dense tensor instead."
)
MAX_TIMEOUTS = 3  # after this many hung calls, a submission's remaining calls are not run
MAX_STARTS = 64  # sandboxes one submission may start: one per exercise, and one more after each crash

_LOAD_REPLY = {
    "ok": bool,
    "functions": wire.Map({"params": [{"name": str, "default": bool}], "error": wire.Opt(str)}),
    "error": wire.ERROR,
    "walls": wire.Map(bool),
}
_CALL_REPLY = {"ok": bool, "value": wire.VALUE, "after": wire.Map(str), "autograd": [str], "error": wire.ERROR}


@dataclass
class Outcome:
    """What one call of a student function did on one geometry."""

    value: object = None  # Returned, Opaque or a dict of them
    error: dict | None = None  # the exception the student's code raised
    failure: str | None = None  # "timeout" | "crash" | "protocol": the sandbox gave no answer
    reason: str = ""
    mutated: dict = field(default_factory=dict)
    autograd: list = field(default_factory=list)
    output: str = ""


def read_sources(submission: Path, exercises, problems: dict | None = None) -> dict[str, Source]:
    """Read the exercise files of a folder as Python would (BOM, coding cookie): {exercise: Source}.

    Only regular files are read (a FIFO or a link to a device would hang or never end); why a file could not be
    read goes into `problems`, so the student sees it.
    """
    from grader.submissions.intake.files import Unreadable, decode_source, read_regular

    problems = {} if problems is None else problems
    sources = {}
    for ex in exercises:
        path = submission / f"{ex}.py"
        if not (path.exists() or path.is_symlink()):
            continue
        try:
            text = decode_source(read_regular(path, MAX_SOURCE_BYTES))
        except (Unreadable, SyntaxError, UnicodeDecodeError, LookupError) as exc:
            problems[ex] = f"{ex}.py could not be read ({exc}); save it as a plain UTF-8 text file and grade again."
            continue
        sources[ex] = Source(ex, str(path.absolute()), text, f"{ex}.py")
    return sources


class Session:
    """One submission's sandbox: one child for all its exercises, and a fresh one after a crash or a hang.

    Exercises share the child, not their answers: each exercise file is executed afresh in a new namespace, and
    the hidden geometries are drawn so that no exercise's inputs hold another's answers there (see
    catalogue.geometries: Ex1's inputs hold Ex2's and Ex3's answers, Ex3's hold one of Ex1's, so Ex2 and Ex3 are
    checked on a hidden geometry of their own). A call that kills the child costs exactly that call: the next call
    starts a new child and loads the file again.
    """

    def __init__(self, sources: dict[str, Source], limits: Limits):
        self.sources = sources
        self.limits = limits
        self.worker: Worker | None = None
        self.exercise: str | None = None
        self.functions: dict[str, dict] = {}
        self.starts = 0
        self.timeouts = 0
        self.sent: tuple[str, Reply | str] | None = None  # prestart(): the exercise whose load is on its way

    def close(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None
        self.sent = None

    def _failed(self, reply) -> Outcome:
        self.timeouts += reply.failure == "timeout"
        self.close()
        return Outcome(failure=reply.failure, reason=reply.reason, output=reply.output)

    def gave_up(self) -> Outcome | None:
        """Return why no more calls of this submission are run, or None."""
        if self.timeouts >= MAX_TIMEOUTS:
            return Outcome(
                failure="timeout", reason=f"not run: {MAX_TIMEOUTS} earlier calls of this submission already timed out"
            )
        if self.starts >= MAX_STARTS:
            return Outcome(failure="crash", reason="the sandbox crashed too many times; grading stopped")
        return None

    def prestart(self, exercises: list[str], ahead: Worker | None = None):
        """Fork the child now, before the truth exists or any reply is read here, and send it the first file.

        A child forked later would inherit what this process computed while judging (differences from the truth,
        a trap's candidates) in its freed memory. The first file loads while this process builds the truth.
        ahead: a child forked earlier still (see grade's sandbox), used instead if its limits are these; stopped
        if it is not used.
        """
        todo = [ex for ex in exercises if ex in self.sources]
        if ahead is not None and (not todo or self.worker is not None or not self._fits(ahead)):
            ahead.close()
            ahead = None
        if not todo or self.worker is not None:
            return
        self.starts += 1
        self.worker = ahead if ahead is not None else Worker(self.limits, warm_here=False)
        src = self.sources[todo[0]]
        self.sent = (todo[0], self.worker.send({"op": "load", "path": src.path, "text": src.text}) or "sent")

    def _fits(self, ahead: Worker) -> bool:
        """Whether a child forked ahead has this session's walls (its request timeout, which only this process
        keeps, is set to this session's)."""
        if not ahead.alive or replace(ahead.limits, timeout=self.limits.timeout) != self.limits:
            return False
        ahead.limits = self.limits
        return True

    def close_all(self):
        """Stop the child."""
        self.close()

    def load(self, exercise: str) -> tuple[dict | None, Outcome | None]:
        """Execute an exercise's file afresh in the child (a new one if none is alive); return its functions."""
        src = self.sources[exercise]
        stop = self.gave_up()
        if stop is not None:
            self.close()
            return None, stop
        sent, self.sent = self.sent, None
        if self.worker is None or not self.worker.alive:  # the first, or a restart after a crash or a hang
            self.close()
            reap(wait=True)  # a new child starts only once the old one is gone: nothing of it overlaps
            self.starts += 1
            self.worker = Worker(self.limits)
            sent = None
        self.exercise = exercise
        if sent is not None and sent[0] == exercise:
            reply = self.worker.receive()[0] if sent[1] == "sent" else sent[1]
        else:
            if sent is not None:  # a file sent ahead for an exercise that is not graded: read its reply first
                if sent[1] == "sent":
                    self.worker.receive()
            reply = self.worker.ask({"op": "load", "path": src.path, "text": src.text})
        if not reply.ok:
            return None, self._failed(reply)
        try:
            wire.check(reply.header, _LOAD_REPLY, "load reply")
        except WireError as exc:
            self.close()
            return None, Outcome(failure="protocol", reason=f"{MALFORMED} ({exc})", output=reply.output)
        if not reply.header.get("ok"):
            self.exercise = None  # the child holds no loaded file now; the next exercise loads its own
            return None, Outcome(error=_error(reply.header, src), output=reply.output)
        self.functions[exercise] = reply.header.get("functions") or {}
        sandbox.saw_walls(reply.header.get("walls"))  # what this machine gave a real child: no probe needed
        return self.functions[exercise], None

    def call(self, exercise: str, function: str, args: dict, reload: bool = False) -> Outcome:
        """Call one student function with these inputs (all sent from here); reload=True re-executes the file."""
        return self.call_runs(exercise, function, [(args, reload)])[0]

    def call_runs(self, exercise: str, function: str, runs: list[tuple[dict, bool]]) -> list[Outcome]:
        """Call a function once per (inputs, reload) run, in one request; each run has its own deadline.

        After a run that hangs, crashes or breaks the protocol, the later runs are not made: they repeat its outcome.
        """
        return self.finish_runs(self.send_runs(exercise, function, runs))

    def send_runs(self, exercise: str, function: str, runs: list[tuple[dict, bool]]) -> Pending:
        """Send the request of call_runs without waiting for its replies (a fresh child first, if need be)."""
        stop = self.gave_up()
        if stop is not None:
            return Pending(exercise, runs, [stop] * len(runs))
        if self.worker is None or not self.worker.alive or self.exercise != exercise or self.sent is not None:
            _, failed = self.load(exercise)
            if failed is not None:
                return Pending(exercise, runs, [failed] * len(runs))
        enc = wire.Encoder(align=64)  # the child maps the inputs in place: each tensor on its own aligned offset
        sent = [{"args": {k: enc.value(v) for k, v in args.items()}, "reload": reload} for args, reload in runs]
        watch = [
            {k: (d["offset"], d["nbytes"]) for k, d in run["args"].items() if d["kind"] == "tensor"} for run in sent
        ]
        request = {"op": "calls", "function": function, "runs": sent}
        failed = self.worker.send(request, enc.parts, watch=watch)  # the tensors' own memory, uncopied
        return Pending(exercise, runs, None, [failed] if failed is not None else None)

    def finish_runs(self, pending: Pending) -> list[Outcome]:
        """Read and decode the replies of a request send_runs made."""
        if pending.outcomes is not None:
            return pending.outcomes
        replies = pending.failed or self.worker.receive(len(pending.runs))
        outcomes: list[Outcome] = []
        for (args, _), reply in zip(pending.runs, replies, strict=False):
            if not reply.ok:
                outcomes.append(self._failed(reply))
                break
            try:
                outcomes.append(_outcome(reply, args, self.sources.get(pending.exercise)))
            except WireError as exc:
                self.close()
                outcomes.append(Outcome(failure="protocol", reason=f"{MALFORMED} ({exc})", output=reply.output))
                break
        return outcomes + [outcomes[-1]] * (len(pending.runs) - len(outcomes))


@dataclass
class Pending:
    """A request send_runs made: its runs, and either their outcomes already or the replies still to read."""

    exercise: str
    runs: list
    outcomes: list[Outcome] | None = None
    failed: list | None = None


def _outcome(reply, args: dict, source: Source | None = None) -> Outcome:
    """Decode a call's reply strictly, and decide here whether the call changed any of its inputs."""
    h = reply.header
    wire.check(h, _CALL_REPLY, "call reply")
    dec = wire.Decoder(reply.blob)
    value = dec.value(h["value"]) if h.get("ok") and "value" in h else None
    mutated = {}
    if reply.changed is not None:  # read from the memory the child was given its inputs in, never its own word
        mutated = {name: True for name in sorted(reply.changed)}
    else:  # the spawn backend (a student's own laptop): the child reports a digest of each input after the call
        after = h.get("after") or {}
        for name, before in args.items():
            if not isinstance(before, torch.Tensor):
                continue
            if name not in after:
                raise WireError(f"input {name!r} missing from the reply")
            if after[name] != _digest(before):
                mutated[name] = True
    return Outcome(
        value=value,
        error=None if h.get("ok") else _error(h, source),
        mutated=mutated,
        autograd=list(h.get("autograd") or [])[:10],
        output=reply.output,
    )


_DIGESTS: dict[int, tuple[torch.Tensor, int, str]] = {}


def _digest(t: torch.Tensor) -> str:
    """Return wire.digest(t), remembered for the fixture's tensors, which every submission sends again."""
    known = _DIGESTS.get(id(t))
    if known is not None and known[0] is t and known[1] == t._version:
        return known[2]
    d = wire.digest(t)
    if len(_DIGESTS) < 4096:
        _DIGESTS[id(t)] = (t, t._version, d)
    return d


def _error(header: dict, source: Source | None = None) -> dict:
    err = header.get("error")
    if not isinstance(err, dict):
        return {"type": "Error", "message": "the sandbox reported an unreadable error"}
    out = {k: err.get(k) for k in ("type", "message", "line", "code", "function", "memory")}
    if source is not None and isinstance(out["line"], int):
        out["where"] = source.where(out["line"])  # 'cell 11, line 24' for a notebook
    return out


def _at(err: dict) -> str:
    """Return where an error happened: 'line 7', or 'cell 11, line 24' for code from a notebook."""
    return err.get("where") or f"line {err['line']}"


def _autograd_at(out: Outcome) -> str:
    """Return where the student's code reached autograd (' at line 7: `loss.backward()`'), or '' if not known."""
    err = out.error or {}
    if err.get("type") != "AutogradForbidden" or not err.get("line"):
        return ""
    return f" at {_at(err)}" + (f": `{err['code']}`" if err.get("code") else "")


# ---------------------------------------------------------------------------------------------------------------


def grade(
    submission,
    exercises=catalogue.EXERCISES,
    *,
    only=None,
    data=None,
    limits: Limits | None = None,
    name: str | None = None,
    policy: Policy | None = None,
    level: str = traps.DEFAULT_LEVEL,
    sandbox: Worker | None = None,
    wait_for_sandboxes: bool = True,
) -> SubmissionResult:
    """Grade a submission (a folder of exercise files, or what intake read) and return every item's verdict.

    level: how much each message may say, "diagnose" (what is wrong and where), "hint" or "full".
    sandbox: a sandbox child forked ahead of need (`grade exN` forks one as soon as torch is imported, before the
    submission is read): the first exercise loads in it; it is stopped unused when no exercise needs one.
    wait_for_sandboxes: False returns once the last sandbox child is killed, without waiting for it to finish dying
    (~10 ms for a torch-sized process), nor waits for the truth's helper to end once its truth is read: for a
    process that exits right after the result is shown, leaving them to be reaped for it.
    """
    traps.check_level(level)
    policy = policy or Policy()
    if not isinstance(submission, Submission):
        folder, problems = Path(submission), {}
        sources = read_sources(folder, catalogue.EXERCISES, problems)
        submission = Submission(name or str(folder), sources, problems=problems)
    for ex, src in submission.sources.items():  # never run what the grader could not read (and scan) itself
        if ex not in submission.problems and bounded.tokens_over(src.text) is not None:
            submission.problems[ex] = str(bounded.too_large(src.label))
    limits = limits or Limits()
    calls = catalogue.select(exercises, only)
    wanted = {c.exercise for c in calls}
    draw = catalogue.Draw.of(policy.secret, submission.sources)  # the course's secret, this submission's own files
    sources = {ex: src for ex, src in submission.sources.items() if ex in wanted}
    # a hidden truth for the exercises that will run; a missing or unreadable file needs only the lecture's shapes
    run = {ex for ex in sources if ex not in submission.problems}
    started = catalogue.start_fixtures(calls, data, draw, run)  # built in a helper while files are checked
    for ex, src in sources.items():  # a route out of the exercise (a frame, raw memory): the file is not run at all
        escape = next(iter(internals.escapes(ex, src.text)), None)
        if ex not in submission.problems and escape is not None:
            where = src.where(escape.line) if src.line_map else f"{ex}.py line {escape.line}"
            submission.problems[ex] = internals.refused_message(escape, where)
    session = Session(sources, limits)
    items: list[ItemResult] = []
    with jail.held():
        try:
            # every child forked before the truth exists here and before any reply is judged (see prestart)
            todo = [ex for ex in catalogue.EXERCISES if ex in sources and ex not in submission.problems]
            session.prestart(todo, sandbox)
            # read, not run: the scan fills the wait for the truth
            flags = [f.to_dict() for ex in sorted(sources) for f in internals.scan(ex, sources[ex].text)]
            numeric = [f.to_dict() for ex in sorted(sources) for f in internals.numeric(ex, sources[ex].text)]
            catalogue.build_fixtures(calls, data, draw, started, wait=wait_for_sandboxes, run=run)
            for ex in catalogue.EXERCISES:
                ex_calls = [c for c in calls if c.exercise == ex]
                if ex_calls:
                    items += _grade_exercise(session, ex, ex_calls, submission, data, draw)
        finally:
            session.close_all()
            reap(wait=wait_for_sandboxes)
    result = SubmissionResult(name or submission.name, items)
    if flags or numeric:
        result.extra["flags"] = {
            **({"private_internals": flags} if flags else {}),
            **({"numeric_differentiation": numeric} if numeric else {}),
        }
    policy.apply(result)  # points per item and exercise
    return conclude(result, level)


def failed_result(name: str, message: str, data=None, exercises=catalogue.EXERCISES) -> SubmissionResult:
    """Return a result whose every item is an error with this message (the grader itself could not finish)."""
    items = [_blank(c, i, data, "error", message) for c in catalogue.select(exercises) for i in c.items]
    return SubmissionResult(name, items)


def _grade_exercise(session: Session, ex: str, calls, submission: Submission, data, draw) -> list[ItemResult]:
    if ex in submission.problems:
        why = submission.problems[ex]
        return [_blank(c, i, data, "error", why, scope="file") for c in calls for i in c.items]
    if ex not in session.sources:
        labels = [s.label for s in submission.sources.values()]
        notebook = next((label.split(" cell")[0] for label in labels if ".ipynb" in label), None)
        missing = (
            f"No {ex} code was found in {notebook}: no cell assigns its gradients. Assign them in a cell "
            f"(marked '# Exercise {ex[2:]}' if it sits elsewhere), run it, and grade again."
            if notebook
            else f"No {ex}.py was found in the submission."
        )
        return [_blank(c, i, data, "not_attempted", missing, scope="file") for c in calls for i in c.items]
    functions, failed = session.load(ex)
    if failed is not None:
        status, message = _failure_message(failed, f"loading {ex}.py")
        return [_blank(c, i, data, status, message, failed.output, scope="file") for c in calls for i in c.items]
    results, started = [], None
    for k, call in enumerate(calls):
        items, pending = started or _start_call(session, call, functions, data, draw)
        if items is None:
            fx_a, fx_b, outs = pending
            out_a, out_b = session.finish_runs(outs)
            if k + 1 < len(calls):  # the next call runs in the child while this one is judged here
                started = _start_call(session, calls[k + 1], functions, data, draw)
            if out_a.failure or out_a.error:  # the hidden geometry matters only for an answer that ran
                out_b = out_a
            items = [judge(i, _pick(out_a, call, i), _pick(out_b, call, i), fx_a, fx_b) for i in call.items]
        else:
            started = None
        results += items
    return results


def _start_call(
    session: Session, call: catalogue.Call, functions: dict, data, draw: catalogue.Draw
) -> tuple[list | None, tuple | None]:
    """Start one call: return (its items, None) when done here, or (None, (fixture a, fixture b, its request))."""
    info = functions.get(call.function)
    if info is None:
        msg = f"{call.exercise}.py has no function `{call.function}`; define it with the stub's name."
        return [_blank(call, i, data, "not_attempted", msg) for i in call.items], None
    geo_a, geo_b = catalogue.geometries(call, draw)
    fx_a = catalogue.build_fixture(call, geo_a, data)
    fx_b = catalogue.build_fixture(call, geo_b, data)
    problem, names = _bind(call, info, fx_a)
    if problem:
        return [_blank(call, i, data, "error", problem) for i in call.items], None
    if call.kind == "training":
        steps = _train(session, call, names, fx_a)
        result = judge_training(call.items[0], steps, fx_a)
        if result.status == "passed":  # the same steps on the hidden geometry, or a table of answers would pass
            result = judge_training(call.items[0], steps, fx_a, _train(session, call, names, fx_b), fx_b)
        return [result], None
    # both geometries in one request, each with its own deadline (neither holds this item's answer); sent only
    # once the previous call has answered, since this one's inputs hold the previous call's answer
    runs = [(_args(fx_a, call, names), call.ex4), (_args(fx_b, call, names), call.ex4)]
    return None, (fx_a, fx_b, session.send_runs(call.exercise, call.function, runs))


def _train(session: Session, call: catalogue.Call, names, fx: fixture.Fixture) -> list[Outcome]:
    """Feed the student's backward each training step of a fixture; stop at the first that fails to run.

    One request per step: a step's inputs reveal the previous step's answer, so they must not arrive early. The
    file is executed afresh before the first step, so nothing survives from the calls before.
    """
    steps = []
    for k, (inputs, _) in enumerate(fx.steps):
        out = session.call(call.exercise, call.function, {n: inputs[n] for n in names}, reload=k == 0)
        steps.append(out)
        if out.failure or out.error:
            break
    return steps


def _args(fx: fixture.Fixture, call: catalogue.Call, names) -> dict:
    """Return a call's inputs on one fixture, by name: forward tensors, parameters, sizes and true gradients."""
    inputs = fx.inputs()
    return {n: inputs[n] if n in inputs else fx.truth[n] for n in names}


def _bind(call: catalogue.Call, info: dict, fx: fixture.Fixture) -> tuple[str | None, list[str]]:
    """Check a function's parameter names against what it may ask for; return (problem, names to pass)."""
    if info.get("error"):
        return f"`{call.function}`: {info['error']}.", []
    available = catalogue.available(call, fx)
    names = []
    for p in info.get("params", []):
        name = p.get("name")
        if name in available:
            names.append(name)
        elif p.get("default"):
            continue
        elif name in {i.name for i in call.items}:
            return own_gradient(call, name), []
        elif call.exercise == "ex1" and name in fx.truth:
            return (
                f"`{call.function}` asks for `{name}`, a gradient that comes later in backprop order, so it is "
                f"not known yet at this step. Available gradients: {', '.join(call.grads) or 'none'}."
            ), []
        else:
            return (
                f"`{call.function}` asks for `{name}`, which the grader does not provide. "
                f"Ask for any of: {', '.join(available)}."
            ), []
    return None, names


def _pick(out: Outcome, call: catalogue.Call, item: catalogue.Item) -> Outcome:
    """Return the outcome as seen by one item: for ex4.backward, the dict entry d<param>."""
    if call.kind != "dict" or out.failure or out.error:
        return out
    value = out.value
    if not isinstance(value, dict):
        kind = value.type_name if isinstance(value, Opaque) else "torch.Tensor"
        return Outcome(
            error={"type": "TypeError", "message": not_a_dict(kind), "scope": "call"},
            mutated=out.mutated,
            autograd=out.autograd,
            output=out.output,
        )
    if item.name not in value:
        keys = ", ".join(sorted(value)) or "none"
        return Outcome(
            error={"type": "KeyError", "message": f"backward's dict has no key '{item.name}' (it has: {keys})"},
            mutated=out.mutated,
            autograd=out.autograd,
            output=out.output,
        )
    return Outcome(value=value[item.name], mutated=out.mutated, autograd=out.autograd, output=out.output)


def own_gradient(call: catalogue.Call, name: str) -> str:
    """Return what to tell a student whose function asks for a gradient it must compute itself."""
    what = "the very gradient it must compute" if len(call.items) == 1 else "one of the gradients it must compute"
    return (
        f"`{call.function}` asks for `{name}`, {what}: the grader cannot pass a function its own answer. "
        f"Available gradients: {', '.join(call.grads) or 'none'}."
    )


def not_a_dict(kind: str) -> str:
    """Return what to tell a student whose ex4 backward returned something other than a dict."""
    return (
        f"backward returned a {kind}, but it must return a dict with one gradient per parameter, under the keys "
        f"{', '.join(fixture.EX4_GRADS)} (the lecture's `grads` list has no names, so the grader could not tell "
        f"which tensor is which). No gradient of Ex4 could be graded."
    )


# ---------------------------------------------------------------------------------------------------------------
# verdicts


def _blank(call, item, data, status, message, output="", scope="item") -> ItemResult:
    """Return the verdict on an item that was not judged on values; scope "file" when its whole file failed."""
    fx = catalogue.build_fixture(call, catalogue.graded_geometry(call), data)
    return ItemResult(
        item.id,
        item.exercise,
        item.name,
        status,
        _expected_shape(item, fx),
        item.points,
        message=message,
        output=output,
        scope=scope,
    )


def _expected_shape(item: catalogue.Item, fx: fixture.Fixture) -> list:
    return [] if item.name == "training" else list(fx.truth["d" + item.var].shape)


def _failure_message(out: Outcome, doing: str) -> tuple[str, str]:
    """Return (status, message) for a call that raised, hung or crashed."""
    loading = doing.startswith("loading ")  # a whole file: its message says what none of its items could do
    if out.failure == "timeout" and loading:
        return "timeout", (
            f"Timed out while {doing}: {out.reason}, so none of its functions could be graded. Look for a loop "
            f"at the top level of the file (outside any function) that never ends."
        )
    if out.failure == "timeout":
        return "timeout", (
            f"Timed out while {doing}: {out.reason}. Look for an infinite loop (or a Python loop over every "
            f"element); the other items were graded as usual."
        )
    if out.failure == "protocol":
        return "error", f"The sandbox stopped while {doing}: {out.reason}. {WROTE_TO_PIPE}"
    if out.failure:
        return "error", f"The sandbox stopped while {doing}: {out.reason}. {PROCESS_ENDED}"
    err = out.error or {}
    if err.get("type") == "NotImplementedError" and not loading and _raised_by_stub(err):
        return "not_attempted", "Not attempted yet: the function still raises NotImplementedError."
    where = ""
    if err.get("line"):
        where = f" at {_at(err)}"
        if err.get("code"):
            where += f": `{err['code']}`"
    text = f"{err.get('type')}: {err.get('message')}" if err.get("message") else str(err.get("type"))
    if err.get("scope") == "call" or err.get("type") == "NotebookError":  # the notebook converter's says where
        return "error", str(err.get("message"))
    if err.get("memory"):
        return "error", f"Ran out of memory{where} (the sandbox allows a limited amount). {text}"
    if loading:
        file = doing.removeprefix("loading ")
        if err.get("type") == "BlockedImport":
            fix = (
                f"Delete that import from {file} (plotting and file access belong in the notebook, not in "
                f"the graded file) and grade again."
            )
        elif err.get("type") in ("SyntaxError", "IndentationError", "TabError"):
            fix = f"Python cannot read {file} past that line: fix it and grade again."
        else:
            fix = "Its top level (outside any function) failed; fix that line and grade again."
        at = f" ({_at(err)}" + (f": `{err['code']}`)" if err.get("code") else ")") if err.get("line") else ""
        return "error", f"{file} could not be loaded{at}, so none of its functions were graded. {text}. {fix}"
    if err.get("type") == "BlockedImport":
        return "error", f"{text}{where}."
    if err.get("type") == "NotImplementedError":  # torch's, inside real work (the stub's own is "not attempted")
        return "error", f"Raised {text}{where}. {TORCH_NOT_IMPLEMENTED}"
    return "error", f"Raised {text}{where}."


def _raised_by_stub(err: dict) -> bool:
    """Return whether a NotImplementedError is the stub's own raise, not one torch raised inside real work."""
    return not err.get("line") or "NotImplementedError" in (err.get("code") or "")


def _tensor_problem(out: Outcome, item, expected) -> str | None:
    """Return why a returned value is not a float32 tensor, or None."""
    value = out.value
    shape = "(" + ", ".join(map(str, expected)) + ("," if len(expected) == 1 else "") + ")"
    if isinstance(value, Opaque):
        return f"Returned a {value.type_name}; return a torch.Tensor of shape {shape}."
    if isinstance(value, dict):
        return f"Returned a dict; return a torch.Tensor of shape {shape}."
    if not isinstance(value, Returned):
        return f"Returned nothing usable; return a torch.Tensor of shape {shape}."
    if value.tensor.dtype != torch.float32:
        return wrong_dtype(value.tensor.dtype)
    return None


# where a gradient of another dtype comes from, checked with torch 2: torch.tensor of Python floats is float32, of a
# numpy array or a numpy float64 float64; a float32 tensor plus a numpy array is float64; a float32 tensor times a
# 0-dim float64 tensor or a numpy float64 stays float32, times a (3,) float64 tensor is float64
DTYPE_ORIGIN = {
    "float64": "A float64 tensor comes from numpy (its arrays and numbers are float64, and so is a tensor made from "
    "one, or added to a numpy array), from .double or torch.float64 asked for by name, or from arithmetic with "
    "another float64 tensor that has dimensions. Python floats, and tensors made from them, are float32.",
    "float16": "A float16 tensor comes from .half or a dtype asked for by name.",
    "bfloat16": "A bfloat16 tensor comes from .bfloat16 or a dtype asked for by name.",
    "integer": "An integer tensor comes from integers (Xb, Yb, an arange, a list of ints, or a zeros_like of one of "
    "them) that no float arithmetic ever touched.",
    "bool": "A bool tensor comes from a comparison.",
}


def wrong_dtype(dtype: torch.dtype) -> str:
    """Return what to tell a student whose gradient is not float32, and where such a dtype comes from."""
    name = str(dtype).removeprefix("torch.")
    kind = "bool" if dtype == torch.bool else name if dtype.is_floating_point or dtype.is_complex else "integer"
    origin = DTYPE_ORIGIN.get(kind, "")
    return f"Returned a tensor of dtype {name}; gradients of this float32 model are float32. {origin}".strip()


def judge(item: catalogue.Item, out_a: Outcome, out_b: Outcome, fx_a, fx_b) -> ItemResult:
    """Judge one gradient item from its outcomes on the graded and the hidden geometry."""
    truth = fx_a.truth["d" + item.var]
    result = ItemResult(
        item.id, item.exercise, item.name, "failed", list(truth.shape), item.points, output=out_a.output
    )
    findings: list[traps.Finding] = []
    if out_a.autograd:
        findings.append(traps.finding("uses-autograd", calls=", ".join(out_a.autograd), at=_autograd_at(out_a)))
        if item.exercise == "ex4":  # one call gives all of Ex4's gradients: said once, above the table
            result.scope = "call"
        return _finish(result, "failed", findings)
    if out_a.failure or out_a.error:
        status, result.message = _failure_message(out_a, f"running `{item.exercise}.{_function(item)}`")
        result.status = status
        if (out_a.error or {}).get("scope") == "call":
            result.scope = "call"
        return result
    problem = _tensor_problem(out_a, item, truth.shape)
    if problem:
        result.status, result.message = "error", problem
        return result
    returned = out_a.value
    value = returned.tensor
    atol, noise = _tolerance(item, fx_a)
    c = cmp.compare(value, truth, atol, noise=noise)
    result.shape, result.exact, result.approx, result.maxdiff = list(value.shape), c.exact, c.approx, c.maxdiff
    result.value, result.truth = value, truth
    if returned.requires_grad or returned.grad_fn:
        findings.append(traps.finding("uses-autograd", calls="a tensor that requires grad (autograd was on)", at=""))
    if out_a.mutated:
        names = sorted(out_a.mutated)
        findings.append(traps.finding("mutates-input", names=", ".join(names), first=names[0]))
    mistakes = _mistakes_within_rounding(item, value, fx_a, c.passed and (c.maxdiff or 0.0) > atol)
    if mistakes:  # inside the rounding allowance, but exactly a known mistake
        result.approx = False
        return _finish(result, "failed", findings + mistakes)
    if not c.passed:
        ev = traps.Evidence(item.id, item.var, value, truth, fx_a, c)
        found = traps.diagnose(ev)
        findings += found
        if not found and c.shape_ok:
            result.message = traps.locate(value, truth)
        return _finish(result, "failed", findings)
    # right on the graded geometry: the hidden one must agree, or sizes are hard-coded
    how, allowance = _second_geometry(item, out_b, fx_b)
    result.hidden = "failed" if how else "passed"
    if how:
        findings.append(traps.finding("hardcoded-size", how=how))
    elif allowance:  # right there only thanks to the rounding allowance: unless exactly a known mistake
        findings += _mistakes_within_rounding(item, out_b.value.tensor, fx_b, True, remember=False)
    if item.id == "ex1.dlogits":
        findings += traps.dlogits_note(value, fx_a)
    failing = [f for f in findings if f.fails]
    return _finish(result, "failed" if failing else "passed", findings)


def _function(item: catalogue.Item) -> str:
    return "backward" if item.exercise == "ex4" else item.name


def _mistakes_within_rounding(item: catalogue.Item, value: torch.Tensor, fx, passed: bool, remember=True) -> list:
    """Return the known mistakes a passing value matches when it passes only thanks to the rounding allowance.

    passed: whether it passed with the allowance, and could need it (a largest difference within atol never does).
    remember: see compare.close (False for a student's hidden geometry).
    """
    atol, truth = _atol(item), fx.truth["d" + item.var]
    if not passed or cmp.close(value, truth, atol=atol, remember=remember):
        return []
    noise = _noise(item, fx)
    if not noise:
        return []
    c = cmp.compare(value, truth, atol, noise=noise)
    return traps.rounding_mistakes(traps.Evidence(item.id, item.var, value, truth, fx, c))


def prepare_judging(data=None) -> None:
    """Compute, once, what judging needs on the lecture's geometry: every allowed error (compare's cache) and every
    known-wrong variant a trap compares with (traps.VARIANT_TRAPS, the missing eps).

    A batch calls this in the scheduler before it forks the grading processes: every student is judged against
    the same lecture truths, so each grading process inherits them instead of computing them again.
    """
    variants = {v for _, _, v, _ in traps.VARIANT_TRAPS} | {fixture.Variant(no_eps=True)}
    for call in catalogue.select(catalogue.EXERCISES):
        fx = catalogue.build_fixture(call, catalogue.graded_geometry(call), data)
        for v in variants:
            fx.variant(v)
        for item in call.items:
            if item.name == "training":
                for _, truth in fx.steps:
                    for t in truth.values():
                        cmp.compare(t, t, cmp.EX4_ATOL)
            elif ("d" + item.var) in fx.truth:
                truth = fx.truth["d" + item.var]
                atol, noise = _tolerance(item, fx)
                cmp.compare(truth, truth, atol, noise=noise)


@contextlib.contextmanager
def one_student_process() -> Iterator[None]:
    """Grade in a process that grades one student and judges as it goes (Gradescope, PrairieLearn): every sandbox,
    a restart after a crash too, forked by a zygote that never holds the submission or the truth; the truth built
    meanwhile (here, unsealed, as a zygote's client builds it) is not kept past the block."""
    with zygote.serving(), fixture.BUILT.emptied():
        yield


def between_students() -> Callable[[], None]:
    """Note this process's grading state now; return what puts it back, for a process that grades many students.

    What one student's grading leaves behind (their hidden fixtures and the truth in them, what was remembered of
    those) is dropped, so no student's grade depends on who was graded before them in the same process.
    """
    rng = torch.get_rng_state()
    built = dict(fixture.BUILT)
    digests = dict(_DIGESTS)
    allowed = cmp.forgetting_later()

    def put_back():
        torch.set_rng_state(rng)
        fixture.BUILT.clear()
        fixture.BUILT.update(built)
        _DIGESTS.clear()
        _DIGESTS.update(digests)
        allowed()
        arena.ARENA = arena.Arena()  # the next student's truth in memory of its own; the last one's is freed

    return put_back


def _tolerance(item: catalogue.Item, fx) -> tuple[float, float]:
    """Return (atol, noise) for comparing an item with the truth of fx (see compare.NOISE_SLACK)."""
    return _atol(item), _noise(item, fx)


def _atol(item: catalogue.Item) -> float:
    """Return allclose's atol for an item: Ex4 keeps its own looser one (the 1e-7 covers a whole backward)."""
    return cmp.EX4_ATOL if item.exercise == "ex4" else 1e-8


def _noise(item: catalogue.Item, fx) -> float:
    """Return the rounding allowance of an item's truth in fx; none for Ex4 (its atol covers it, and the missing
    eps of BatchNorm moves its parameter gradients by only a few times that)."""
    return 0.0 if item.exercise == "ex4" else fx.rounding("d" + item.var)


def _second_geometry(item, out_b: Outcome, fx_b) -> tuple[dict | None, bool]:
    """Return how the item went wrong on the hidden geometry ({level: text}, no numbers) or None if right, and
    whether it was right only thanks to the rounding allowance."""
    if out_b.failure == "timeout":
        return {"diagnose": "it timed out"}, False
    if out_b.failure:
        return {"diagnose": "the sandbox crashed"}, False
    if out_b.error:
        err = out_b.error
        line = f" at {_at(err)}" if err.get("line") else ""
        code = f" (`{err['code']}`)" if err.get("line") and err.get("code") else ""
        how = {"diagnose": f"it raised {err.get('type')}{line}", "hint": f"it raised {err.get('type')}{line}{code}"}
        return how, False
    truth = fx_b.truth["d" + item.var]
    if _tensor_problem(out_b, item, truth.shape):
        return {"diagnose": "it returned something other than a float32 tensor"}, False
    value = out_b.value.tensor
    if value.shape != truth.shape:
        return {"diagnose": "it returned the wrong shape"}, False
    atol = _atol(item)  # approx is all it needs; the rounding allowance only where allclose alone says no
    if cmp.close(value, truth, atol=atol, remember=False):
        return None, False
    if cmp.close(value, truth, atol=atol, noise=_noise(item, fx_b), remember=False):
        return None, True
    return {"diagnose": "its values are wrong"}, False


def _finish(result: ItemResult, status: str, findings) -> ItemResult:
    """Set an item's status and traps; its message is rendered from the findings at the default level."""
    result.status = status
    result.findings = list(findings)
    result.traps = list(dict.fromkeys(f.trap for f in findings))
    result.note = result.message  # what is said beside the traps (where the values differ, ...)
    return render(result, traps.DEFAULT_LEVEL)


def render(result: ItemResult, level: str) -> ItemResult:
    """Write an item's message and --hints explanations at a message level (diagnose, hint or full)."""
    if not result.findings:
        return result
    messages = [f.text(level) for f in result.findings]
    if result.note:
        messages.append(result.note)
    result.message = " ".join(messages)
    result.hints = [h for h in (traps.TRAPS[t].why(level) for t in result.traps) if h]
    hidden = [f for f in result.findings if f.trap == "hardcoded-size"]
    if hidden:
        result.hidden_message = hidden[0].text(level)
    return result


def conclude(result: SubmissionResult, level: str = traps.DEFAULT_LEVEL) -> SubmissionResult:
    """Render every message at a level, and say once what failed for a whole file or a whole call."""
    traps.link(result.items)
    for item in result.items:
        render(item, level)
    seen: dict[tuple, dict] = {}
    for item in result.items:
        if item.scope == "item":
            continue
        key = (item.exercise, item.message)
        if key not in seen:
            seen[key] = {
                "exercise": item.exercise,
                "file": f"{item.exercise}.py",
                "status": item.status,
                "message": item.message,
                "items": [],
                "output": item.output,
            }
        seen[key]["items"].append(item.id)
    result.problems = list(seen.values())
    return result


def judge_training(item: catalogue.Item, steps: list[Outcome], fx, hidden=None, fx_b=None) -> ItemResult:
    """Judge ex4.training: every consecutive SGD step's gradients must match autograd's, on both geometries.

    hidden: the outcomes of the same steps on fx_b, the hidden geometry (None when they were not run).
    """
    result = _judge_steps(item, steps, fx)
    if hidden is None or result.status != "passed":
        return result
    autograd = sorted({c for out in hidden for c in out.autograd})
    if autograd:
        at = next((_autograd_at(out) for out in hidden if out.autograd), "")
        result.scope = "call"
        return _finish(result, "failed", [traps.finding("uses-autograd", calls=", ".join(autograd), at=at)])
    how = _training_second(hidden, fx_b)
    result.hidden = "failed" if how else "passed"
    return _finish(result, "failed", [traps.finding("hardcoded-size", how=how)]) if how else result


def _training_second(steps: list[Outcome], fx) -> dict | None:
    """Return how the training steps went wrong on the hidden geometry ({level: text}, no numbers), or None."""
    for k, out in enumerate(steps):
        if out.failure or out.error:
            return _second_geometry(None, out, fx)[0]
        if not isinstance(out.value, dict):
            return {"diagnose": "it returned something other than a dict of gradients"}
        for g in fixture.EX4_GRADS:
            v, t = out.value.get(g), fx.steps[k][1][g]
            if not isinstance(v, Returned) or v.tensor.dtype != torch.float32:
                return {"diagnose": "it returned something other than a float32 tensor"}
            if v.tensor.shape != t.shape:
                return {"diagnose": "it returned the wrong shape"}
            if not cmp.close(v.tensor, t, atol=cmp.EX4_ATOL, remember=False):
                return {"diagnose": "its values are wrong" if k == 0 else "its values drift from autograd's"}
    return None if len(steps) == len(fx.steps) else {"diagnose": "it stopped early"}


def _judge_steps(item: catalogue.Item, steps: list[Outcome], fx) -> ItemResult:
    """Judge the training steps on one geometry."""
    result = ItemResult(item.id, item.exercise, item.name, "failed", [], item.points)
    worst, exact_all, drifted = 0.0, True, []
    for k, out in enumerate(steps):
        truth = fx.steps[k][1]
        result.output = out.output
        if out.autograd:
            result.scope = "call"  # the same call as the gradients': said once, above the table
            finding = traps.finding("uses-autograd", calls=", ".join(out.autograd), at=_autograd_at(out))
            return _finish(result, "failed", [finding])
        if out.failure or out.error or not isinstance(out.value, dict):
            if not (out.failure or out.error):
                kind = out.value.type_name if isinstance(out.value, Opaque) else "torch.Tensor"
                out = Outcome(error={"type": "TypeError", "message": not_a_dict(kind), "scope": "call"})
                result.scope = "call" if k == 0 else "item"
            result.status, msg = _failure_message(out, f"training step {k + 1}")
            result.message = msg if k == 0 else f"Steps 1-{k} matched autograd. {msg}"
            return result
        wrong = []
        for g in fixture.EX4_GRADS:
            v = out.value.get(g)
            t = truth[g]
            if not isinstance(v, Returned) or v.tensor.shape != t.shape or v.tensor.dtype != torch.float32:
                wrong.append(g)
                continue
            c = cmp.compare(v.tensor, t, cmp.EX4_ATOL)
            worst = max(worst, c.maxdiff or 0.0)
            exact_all &= c.exact
            if not c.approx:
                wrong.append(g)
        drifted.append(wrong)
    result.shape, result.maxdiff = [], worst
    result.exact, result.approx = exact_all and not any(drifted), not any(drifted)
    if not any(drifted):
        return _finish(result, "passed", [])
    first_bad = next(k for k, w in enumerate(drifted) if w)
    if first_bad == 0:
        result.message = (
            f"Already the first training step differs from autograd in {', '.join(drifted[0])}; "
            f"see the ex4.{drifted[0][0]} item above."
        )
        return _finish(result, "failed", [])
    grads = ", ".join(sorted({g for w in drifted for g in w}))
    return _finish(result, "failed", [traps.finding("stale-state", step=first_bad + 1, grads=grads)])
