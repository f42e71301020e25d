"""The sandbox's cost per submission: sandboxed `runner.grade` against the same grading done in this process.

The in-process comparator is the runner itself with its sandbox session swapped for one that executes the
files here: the same binding, the same inputs (cloned, as the sandbox receives copies), the same fresh
re-execution of ex4.py, the same mutation check, and the runner's own judge, judge_training, policy and
rendering. Only the sandbox is missing (fork, scrub, jail, wire, tripwires), so the difference is its cost. Both
results must be identical item by item, or nothing is printed.

Works on this checkout's grader and on the previous one (commit 1a600a0, whose Session.call takes both
geometries in one request): run it with PYTHONPATH pointing at either. Hostile submissions are never run here.

    python bench/sandbox_cost.py --subs CLASS/subs [--sample 24] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import describe  # noqa: E402

from grader.grading import runner
from grader.sandbox import wire
from grader.spec import catalogue  # noqa: E402

NEW = "runs" not in inspect.signature(runner.Session.call).parameters  # 1a600a0 sends both geometries at once


def _wrap(v, depth: int = 0):
    """Return a value as the parent sees it after the wire, without the copy: Returned, int, dict or Opaque."""
    if isinstance(v, torch.Tensor):
        if v.is_meta or v.is_nested:  # a tensor the wire cannot carry arrives as its description
            return wire.Opaque(wire.Encoder().value(v)["type"])
        return wire.Returned(v.detach(), bool(v.requires_grad), v.grad_fn is not None)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, dict) and depth == 0:
        return {str(k): _wrap(x, depth + 1) for k, x in v.items()}
    return wire.Opaque(wire._type_name(v))


def _as_plain(value):
    from grader.sandbox import child

    return getattr(child, "_as_plain", lambda v: v)(value)


_AS_PLAIN = _as_plain


def _call(fn, args: dict):
    """Call fn by parameter name, those before a `/` by position, as the child does."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn(**args)
    args, positional = dict(args), []
    for p in params:
        if p.kind != p.POSITIONAL_ONLY or p.name not in args:
            break
        positional.append(args.pop(p.name))
    return fn(*positional, **args)


def _signature(fn) -> dict:
    """Describe a function's parameters as the child's load reply does."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return {"params": [], "error": "its signature cannot be read"}
    params, error = [], None
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            error = f"*{p.name}/**{p.name} cannot be bound: name each input you need as a parameter"
        else:
            params.append({"name": p.name, "default": p.default is not p.empty})
    return {"params": params, "error": error}


def _describe(exc: BaseException, path: str) -> dict:
    """Name an exception and the student's line, as the child does."""
    import traceback

    info = {"type": type(exc).__name__, "message": str(exc)[:600], "line": None, "code": None, "function": None}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    if frames:
        info.update(line=frames[-1].lineno, code=(frames[-1].line or "").strip()[:300], function=frames[-1].name)
    info["memory"] = isinstance(exc, MemoryError)
    return info


class _Files:
    """Execute exercise files in this process and call their functions: the part of the child that grades."""

    def __init__(self, sources: dict):
        self.paths_texts = {ex: _path_text(src) for ex, src in sources.items()}
        self.sources = sources
        self.namespaces: dict[str, dict] = {}
        self.functions: dict[str, dict] = {}
        self.starts = self.timeouts = 0

    def exec_file(self, ex: str):
        path, text = self.paths_texts[ex]
        ns = {"__name__": "submission", "__file__": path}
        try:
            with torch.no_grad():
                exec(compile(text, path, "exec"), ns)
        except Exception as exc:
            return None, runner.Outcome(error=_describe(exc, path))
        self.namespaces[ex] = ns
        self.functions[ex] = {k: _signature(v) for k, v in list(ns.items()) if callable(v) and not k.startswith("_")}
        return self.functions[ex], None

    def invoke(self, ex: str, function: str, args: dict) -> runner.Outcome:
        sent = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}  # the child's copy
        fn = self.namespaces[ex].get(function)
        try:
            with torch.no_grad():
                plain = _AS_PLAIN(_call(fn, sent))  # as the checkout's own child turns it (a sparse one dense)
                wire.Encoder().value(plain)  # and what its encoder refuses, refused here the same way
                value, error = _wrap(plain), None
        except Exception as exc:
            value, error = None, _describe(exc, self.paths_texts[ex][0])
        mutated = {}
        for k, before in args.items():
            if isinstance(before, torch.Tensor):
                now = sent[k]
                if now.dtype != before.dtype or now.shape != before.shape or not torch.equal(now, before):
                    mutated[k] = _wrap(now)
        return runner.Outcome(value=value, error=error, mutated=mutated)

    def close(self):
        self.namespaces.clear()

    def gave_up(self):
        return None


def _path_text(src) -> tuple[str, str]:
    return (src.path, src.text) if hasattr(src, "text") else src  # a Source, or 1a600a0's (path, text)


class NewSession(_Files):
    """Stands in for this checkout's runner.Session (a fresh child per exercise, one geometry per call)."""

    exercise = None

    def load(self, ex: str):
        self.exercise = ex
        return self.exec_file(ex)

    def call(self, ex: str, function: str, args: dict, reload: bool = False):
        if self.exercise != ex or reload:
            _, failed = self.load(ex)
            if failed is not None:
                return failed
        return self.invoke(ex, function, args)

    def call_runs(self, ex: str, function: str, runs: list):
        """Call once per (inputs, reload) run, as the runner's one-request form does."""
        return [self.call(ex, function, args, reload) for args, reload in runs]

    def send_runs(self, ex: str, function: str, runs: list):
        """Make the calls at once (there is no child to overlap with); finish_runs hands their outcomes back."""
        return self.call_runs(ex, function, runs)

    def finish_runs(self, outcomes: list):
        return outcomes


class OldSession(_Files):
    """Stands in for 1a600a0's runner.Session (both geometries in one call; inputs by fixture index)."""

    def load(self, ex: str, fresh: bool = False):
        if ex in self.namespaces and not fresh:
            return self.functions[ex], None
        return self.exec_file(ex)

    def call(self, ex: str, function: str, runs: list, timeout=None):
        from grader.truth import fixture

        outs = []
        for run in runs:
            if run.get("fresh") or ex not in self.namespaces:
                _, failed = self.exec_file(ex)
                if failed is not None:
                    outs.append(failed)
                    continue
            local = fixture.built_fixtures()[run["fixture"]].inputs() if run.get("fixture") is not None else {}
            args = {n: local[n] for n in run.get("local", ())}
            args.update(run.get("sent", {}))
            outs.append(self.invoke(ex, function, args))
        return outs


def grade_in_process(folder: Path):
    """Grade a submission folder with the runner's own logic, every student function executed in this process."""
    calls = catalogue.select(catalogue.EXERCISES)
    if NEW:
        from grader.grading import scan as internals
        from grader.grading.results import SubmissionResult
        from grader.spec.policy import Policy
        from grader.submissions.sources import Submission

        sources = runner.read_sources(folder, catalogue.EXERCISES)
        submission = Submission(str(folder), sources)
        session = NewSession(sources)
        drawn = "draw" in inspect.signature(runner._grade_exercise).parameters  # checkouts since the hidden draws
        draw = catalogue.Draw.of(Policy().secret, sources) if drawn else None  # as runner.grade draws them
        if drawn:
            catalogue.build_fixtures(calls, None, draw)
        extra = (draw,) if drawn else ()
        items = []
        for ex in catalogue.EXERCISES:
            ex_calls = [c for c in calls if c.exercise == ex]
            items += runner._grade_exercise(session, ex, ex_calls, submission, None, *extra)
        result = SubmissionResult(str(folder), items)
        flags = [f.to_dict() for ex in sorted(sources) for f in internals.scan(ex, sources[ex].text)]
        if flags:
            result.extra["flags"] = {"private_internals": flags}
        Policy().apply(result)
        return runner.conclude(result)
    from grader.grading.results import SubmissionResult

    sources = runner.read_sources(folder, {c.exercise for c in calls})
    session = OldSession(sources)
    items = []
    for ex in catalogue.EXERCISES:
        items += runner._grade_exercise(session, ex, [c for c in calls if c.exercise == ex], folder, None)
    return SubmissionResult(str(folder), items)


def _verdicts(result) -> list:
    return [(i.id, i.status, sorted(i.traps), i.exact, i.approx, i.maxdiff, i.message) for i in result.items]


def _held():
    """Hold the jail over the whole run, as grade batch does (1a600a0 had none)."""
    if NEW:
        from grader.sandbox import jail

        return jail.held()
    return contextlib.nullcontext()


def _timed(rounds: int, sample: list, rng, sandboxed: list, inproc: list) -> None:
    """Time both ways on every sampled submission, alternating which goes first; check each result."""
    for r in range(rounds):
        order = list(sample)
        rng.shuffle(order)
        for folder in order:
            for which in (0, 1) if r % 2 == 0 else (1, 0):
                t = time.perf_counter()
                result = runner.grade(folder) if which == 0 else grade_in_process(folder)
                (sandboxed if which == 0 else inproc).append(time.perf_counter() - t)
                if folder.name.endswith("_correct") and result.score != result.max_score:
                    raise SystemExit(f"{folder.name}: the reference scored {result.score}/{result.max_score}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", type=Path, required=True, help="a class built by bench_batch (no hostile cases)")
    ap.add_argument("--sample", type=int, default=24, help="submissions timed (spread over correct and traps)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object (for bench_batch)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # as grade batch does
    folders = sorted(p for p in args.subs.iterdir() if p.is_dir() and not p.name.startswith("h_"))
    rng = random.Random(3)
    correct = [p for p in folders if p.name.endswith("_correct")]
    trapped = [p for p in folders if not p.name.endswith("_correct")]
    k = min(args.sample // 2, len(correct))
    sample = rng.sample(correct, k) + rng.sample(trapped, min(args.sample - k, len(trapped)))
    for folder in sample:  # warm: fixtures built, first-call costs paid; results must agree
        a, b = runner.grade(folder), grade_in_process(folder)
        if _verdicts(a) != _verdicts(b):
            diff = [(x, y) for x, y in zip(_verdicts(a), _verdicts(b), strict=True) if x != y][:3]
            raise SystemExit(f"in-process grading of {folder.name} differs from the sandbox's: {diff}")
    sandboxed, inproc = [], []
    with _held():
        _timed(args.rounds, sample, rng, sandboxed, inproc)
    diffs = [a - b for a, b in zip(sandboxed, inproc, strict=True)]
    out = {
        "grader": str(Path(runner.__file__).parent),
        "sample": len(sample),
        "rounds": args.rounds,
        "sandboxed_ms": [x * 1e3 for x in sandboxed],
        "inproc_ms": [x * 1e3 for x in inproc],
        "diff_ms": [x * 1e3 for x in diffs],
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"grader at {out['grader']}: {len(sample)} submissions x {args.rounds} rounds, results identical")
    print(f"   sandboxed runner.grade     {describe(sandboxed, 'ms', 1e3, 1)}")
    print(f"   in-process, same judging   {describe(inproc, 'ms', 1e3, 1)}")
    print(f"   sandbox cost (paired diff) {describe(diffs, 'ms', 1e3, 1)}")
    print(f"   ratio of medians {statistics.median(sandboxed) / statistics.median(inproc):.2f}")


if __name__ == "__main__":
    main()
