"""Grade one submission: run its functions in a sandbox, then judge every item in this (trusted) process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader import catalogue, fixture, traps
from grader import compare as cmp
from grader.results import ItemResult, SubmissionResult
from grader.sandbox import Limits, Worker
from grader.sources import Source, Submission
from grader.wire import Opaque, Returned, WireError, decode_value

MAX_SOURCE_BYTES = 1 << 20
MAX_RESTARTS = 8
MAX_TIMEOUTS = 3  # after this many hung calls, a submission's remaining calls are not run


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


def read_sources(submission: Path, exercises) -> dict[str, Source]:
    """Read the exercise files present in a submission folder: {exercise: Source}."""
    sources = {}
    for ex in exercises:
        path = submission / f"{ex}.py"
        if path.is_file():
            raw = path.read_bytes()[:MAX_SOURCE_BYTES]
            sources[ex] = Source(ex, str(path.resolve()), raw.decode("utf-8", errors="replace"), f"{ex}.py")
    return sources


class Session:
    """One submission's sandbox: (re)starts the child, (re)loads exercise files, calls functions."""

    def __init__(self, sources, limits: Limits):
        self.sources = sources
        self.limits = limits
        self.worker: Worker | None = None
        self.loaded: set[str] = set()
        self.restarts = 0
        self.timeouts = 0
        self.functions: dict[str, dict] = {}

    def close(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def _ask(self, request: dict, timeout: float | None = None):
        if self.timeouts >= MAX_TIMEOUTS:
            return None
        if self.worker is None or not self.worker.alive:
            if self.worker is not None:
                self.worker.close()
                self.restarts += 1
            if self.restarts > MAX_RESTARTS:
                return None
            self.worker = Worker({ex: (s.path, s.text) for ex, s in self.sources.items()}, self.limits)
            self.loaded.clear()
        reply = self.worker.ask(request, timeout)
        self.timeouts += reply.failure == "timeout"
        return reply

    def gave_up(self) -> Outcome:
        """Return the outcome of a call not run because this submission already hung or crashed too often."""
        if self.timeouts >= MAX_TIMEOUTS:
            return Outcome(
                failure="timeout", reason=f"not run: {MAX_TIMEOUTS} earlier calls of this submission already timed out"
            )
        return Outcome(failure="crash", reason="the sandbox crashed too many times; grading stopped")

    def load(self, exercise: str, fresh: bool = False) -> tuple[dict | None, Outcome | None]:
        """Execute an exercise file in the child; return its functions or why it failed."""
        if exercise in self.loaded and not fresh:
            return self.functions[exercise], None
        reply = self._ask({"op": "load", "exercise": exercise})
        if reply is None:
            return None, self.gave_up()
        if not reply.ok:
            return None, Outcome(failure=reply.failure, reason=reply.reason, output=reply.output)
        if not reply.header.get("ok"):
            return None, Outcome(error=_error(reply.header), output=reply.output)
        self.loaded.add(exercise)
        self.functions[exercise] = reply.header.get("functions") or {}
        return self.functions[exercise], None

    def call(self, exercise: str, function: str, runs: list[dict], timeout=None) -> list[Outcome]:
        """Call one student function once per run ({fixture, local, sent, fresh}) in a single request."""
        if exercise not in self.loaded:
            _, failed = self.load(exercise)
            if failed is not None:
                return [failed] * len(runs)
        request = {"op": "call", "exercise": exercise, "function": function, "runs": runs}
        reply = self._ask(request, (timeout or self.limits.timeout) * len(runs))
        if reply is None:
            return [self.gave_up()] * len(runs)
        if not reply.ok:
            return [Outcome(failure=reply.failure, reason=reply.reason, output=reply.output)] * len(runs)
        headers = reply.header.get("runs")
        if not isinstance(headers, list) or len(headers) != len(runs):
            return [Outcome(failure="protocol", reason="the sandbox answered a different number of calls")] * len(runs)
        return [self._outcome(h, reply) for h in headers]

    @staticmethod
    def _outcome(h, reply) -> Outcome:
        try:
            value = decode_value(h["value"], reply.blob) if h.get("ok") else None
            mutated = {k: decode_value(v, reply.blob) for k, v in (h.get("mutated") or {}).items()}
        except (WireError, KeyError, TypeError, AttributeError) as exc:
            return Outcome(failure="protocol", reason=f"unreadable reply: {exc}", output=reply.output)
        return Outcome(
            value=value,
            error=None if h.get("ok") else _error(h),
            mutated=mutated,
            autograd=[str(a) for a in h.get("autograd") or []][:10],
            output=reply.output,
        )


def _error(header: dict) -> dict:
    err = header.get("error")
    if not isinstance(err, dict):
        return {"type": "Error", "message": "the sandbox reported an unreadable error"}
    return {k: err.get(k) for k in ("type", "message", "line", "code", "function", "memory")}


# ---------------------------------------------------------------------------------------------------------------


def grade(
    submission,
    exercises=catalogue.EXERCISES,
    *,
    only=None,
    data=None,
    limits: Limits | None = None,
    name: str | None = None,
) -> SubmissionResult:
    """Grade a submission (a folder of exercise files, or what intake read) and return every item's verdict."""
    if not isinstance(submission, Submission):
        folder = Path(submission)
        submission = Submission(name or str(folder), read_sources(folder, catalogue.EXERCISES))
    limits = limits or Limits()
    torch.set_num_threads(1)  # the model is tiny, and sandbox children are forked from this process
    calls = catalogue.select(exercises, only)
    for call in calls:  # build every fixture before the sandbox forks, so the child inherits them
        for g in catalogue.geometries(call):
            catalogue.build_fixture(call, g, data)
    wanted = {c.exercise for c in calls}
    sources = {ex: src for ex, src in submission.sources.items() if ex in wanted}
    session = Session(sources, limits)
    items: list[ItemResult] = []
    try:
        for ex in catalogue.EXERCISES:
            ex_calls = [c for c in calls if c.exercise == ex]
            if ex_calls:
                items += _grade_exercise(session, ex, ex_calls, submission, data)
    finally:
        session.close()
    return SubmissionResult(name or submission.name, items)


def _grade_exercise(session: Session, ex: str, calls, submission: Submission, data) -> list[ItemResult]:
    if ex not in session.sources:
        return [
            _blank(c, i, data, "not_attempted", f"No {ex}.py was found in the submission.")
            for c in calls
            for i in c.items
        ]
    functions, failed = session.load(ex)
    if failed is not None:
        status, message = _failure_message(failed, f"loading {ex}.py")
        return [_blank(c, i, data, status, message, failed.output) for c in calls for i in c.items]
    results = []
    for call in calls:
        results += _grade_call(session, call, functions, data)
    return results


def _grade_call(session: Session, call: catalogue.Call, functions: dict, data) -> list[ItemResult]:
    info = functions.get(call.function)
    if info is None:
        msg = f"{call.exercise}.py has no function `{call.function}`; define it with the stub's name."
        return [_blank(call, i, data, "not_attempted", msg) for i in call.items]
    geo_a, geo_b = catalogue.geometries(call)
    fx_a = catalogue.build_fixture(call, geo_a, data)
    fx_b = catalogue.build_fixture(call, geo_b, data)
    problem, names = _bind(call, info, fx_a)
    if problem:
        return [_blank(call, i, data, "error", problem) for i in call.items]
    if call.kind == "training":
        # one request per step: a step's inputs reveal the previous step's answer, so they must not arrive early
        steps = []
        for k, (inputs, _) in enumerate(fx_a.steps):
            run = {"fixture": None, "local": [], "sent": {n: inputs[n] for n in names}, "fresh": k == 0}
            (out,) = session.call(call.exercise, call.function, [run])
            steps.append(out)
            if out.failure or out.error:
                break
        return [judge_training(call.items[0], steps, fx_a)]
    # both geometries in one request (neither holds this item's answer); ex4 re-executes its file in between
    out_a, out_b = session.call(call.exercise, call.function, [_run(fx_a, call, names), _run(fx_b, call, names)])
    return [judge(item, _pick(out_a, call, item), _pick(out_b, call, item), fx_a, fx_b) for item in call.items]


def _run(fx: fixture.Fixture, call: catalogue.Call, names) -> dict:
    """Describe one call of a function on one fixture: inherited inputs by name, true gradients sent."""
    inputs = fx.inputs()
    return {
        "fixture": fixture.built_fixtures().index(fx),
        "local": [n for n in names if n in inputs],
        "sent": {n: fx.truth[n] for n in names if n in call.grads},
        "fresh": call.ex4 and fx.geometry != catalogue.geometries(call)[0],
    }


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
            error={
                "type": "TypeError",
                "message": f"backward returned a {kind}; return a dict with keys {', '.join(fixture.EX4_GRADS)}",
            },
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


# ---------------------------------------------------------------------------------------------------------------
# verdicts


def _blank(call, item, data, status, message, output="") -> ItemResult:
    fx = catalogue.build_fixture(call, catalogue.geometries(call)[0], data)
    return ItemResult(
        item.id,
        item.exercise,
        item.name,
        status,
        _expected_shape(item, fx),
        item.points,
        message=message,
        output=output,
    )


def _expected_shape(item: catalogue.Item, fx: fixture.Fixture) -> list:
    return [] if item.name == "training" else list(fx.truth["d" + item.var].shape)


def _failure_message(out: Outcome, doing: str) -> tuple[str, str]:
    """Return (status, message) for a call that raised, hung or crashed."""
    if out.failure == "timeout":
        return "timeout", (
            f"Timed out while {doing}: {out.reason}. Look for an infinite loop (or a Python loop over every "
            f"element); the other items were graded as usual."
        )
    if out.failure:
        return "error", f"The sandbox stopped while {doing}: {out.reason}."
    err = out.error or {}
    if err.get("type") == "NotImplementedError":
        return "not_attempted", "Not attempted yet: the function still raises NotImplementedError."
    where = ""
    if err.get("line"):
        where = f" at line {err['line']}"
        if err.get("code"):
            where += f": `{err['code']}`"
    text = f"{err.get('type')}: {err.get('message')}" if err.get("message") else str(err.get("type"))
    if err.get("memory"):
        return "error", f"Ran out of memory{where} (the sandbox allows a limited amount). {text}"
    if err.get("type") == "BlockedImport":
        return "error", f"{text}{where}."
    return "error", f"Raised {text}{where}."


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
        return (
            f"Returned a tensor of dtype {str(value.tensor.dtype).removeprefix('torch.')}; gradients of this "
            f"float32 model are float32 (avoid .double(), integer tensors and torch.tensor() of Python floats)."
        )
    return None


def judge(item: catalogue.Item, out_a: Outcome, out_b: Outcome, fx_a, fx_b) -> ItemResult:
    """Judge one gradient item from its outcomes on the graded and the hidden geometry."""
    truth = fx_a.truth["d" + item.var]
    result = ItemResult(
        item.id, item.exercise, item.name, "failed", list(truth.shape), item.points, output=out_a.output
    )
    findings: list[traps.Finding] = []
    if out_a.autograd:
        findings.append(traps.finding("uses-autograd", calls=", ".join(out_a.autograd)))
        return _finish(result, "failed", findings)
    if out_a.failure or out_a.error:
        status, result.message = _failure_message(out_a, f"running `{item.exercise}.{_function(item)}`")
        result.status = status
        return result
    problem = _tensor_problem(out_a, item, truth.shape)
    if problem:
        result.status, result.message = "error", problem
        return result
    returned = out_a.value
    value = returned.tensor
    atol = cmp.EX4_ATOL if item.exercise == "ex4" else 1e-8
    c = cmp.compare(value, truth, atol)
    result.shape, result.exact, result.approx, result.maxdiff = list(value.shape), c.exact, c.approx, c.maxdiff
    result.value, result.truth = value, truth
    if returned.requires_grad or returned.grad_fn:
        findings.append(traps.finding("uses-autograd", calls="a tensor that requires grad (autograd was on)"))
    if out_a.mutated:
        names = sorted(out_a.mutated)
        findings.append(traps.finding("mutates-input", names=", ".join(f"`{n}`" for n in names), first=names[0]))
    if not c.passed:
        ev = traps.Evidence(item.id, item.var, value, truth, fx_a, c)
        found = traps.diagnose(ev)
        findings += found
        if not found and c.shape_ok:
            result.message = traps.locate(value, truth)
        return _finish(result, "failed", findings)
    # right on the graded geometry: the hidden one must agree, or sizes are hard-coded
    how = _second_geometry(item, out_b, fx_b)
    if how:
        findings.append(traps.finding("hardcoded-size", how=how))
    if item.id == "ex1.dlogits":
        findings += traps.dlogits_note(value, fx_a)
    failing = [f for f in findings if f.fails]
    return _finish(result, "failed" if failing else "passed", findings)


def _function(item: catalogue.Item) -> str:
    return "backward" if item.exercise == "ex4" else item.name


def _second_geometry(item, out_b: Outcome, fx_b) -> str | None:
    """Return how the item went wrong on the hidden geometry, without its numbers, or None if it is right."""
    if out_b.failure == "timeout":
        return "it timed out"
    if out_b.failure:
        return "the sandbox crashed"
    if out_b.error:
        err = out_b.error
        line = f" at line {err['line']}" + (f" (`{err['code']}`)" if err.get("code") else "") if err.get("line") else ""
        return f"it raised {err.get('type')}{line}"
    truth = fx_b.truth["d" + item.var]
    if _tensor_problem(out_b, item, truth.shape):
        return "it returned something other than a float32 tensor"
    value = out_b.value.tensor
    if value.shape != truth.shape:
        return "it returned the wrong shape"
    if not cmp.compare(value, truth, cmp.EX4_ATOL if item.exercise == "ex4" else 1e-8).approx:
        return "its values are wrong"
    return None


def _finish(result: ItemResult, status: str, findings) -> ItemResult:
    result.status = status
    result.traps = list(dict.fromkeys(f.trap for f in findings))
    messages = [f.message for f in findings]
    if result.message:
        messages.append(result.message)
    result.message = " ".join(messages)
    result.hints = [traps.TRAPS[t].hint for t in result.traps]
    return result


def judge_training(item: catalogue.Item, steps: list[Outcome], fx) -> ItemResult:
    """Judge ex4.training: every consecutive SGD step's gradients must match autograd's."""
    result = ItemResult(item.id, item.exercise, item.name, "failed", [], item.points)
    worst, exact_all, drifted = 0.0, True, []
    for k, out in enumerate(steps):
        truth = fx.steps[k][1]
        if out.autograd:
            return _finish(result, "failed", [traps.finding("uses-autograd", calls=", ".join(out.autograd))])
        if out.failure or out.error or not isinstance(out.value, dict):
            if not (out.failure or out.error):
                out = Outcome(error={"type": "TypeError", "message": "backward did not return a dict"})
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
