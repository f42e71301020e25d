"""How much does `grade ex1` cost on top of importing torch, and where does the harness's own time go?

Part 1 runs, as subprocesses and interleaved round-robin, `python -c "import torch"`, `grade ex1 --submission
reference` and `grade ex1` (the stubs), and compares medians. Part 2 breaks the harness's own work down:
building fixture + truth for the two ex1 geometries cold (in a fresh subprocess, after `import torch`), loading a
submission (read sources + fork the sandbox + exec the module: `runner.Session(...).load('ex1')`) and grading
the 26 items (a warm `runner.grade`, fixtures cached). Prints only; nothing is asserted.

    python bench/bench_grade.py [--runs 5] [--cold-runs 3] [--warm-runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REFERENCE = ROOT / "reference"
EXERCISES = ROOT / "exercises"

# Timed in a fresh interpreter: the cold cost of importing the grader and of building both ex1 fixtures.
COLD_SNIPPET = r"""
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from grader import fixture
t2 = time.perf_counter()
fixture.build(fixture.PRIMARY)
fixture.build(fixture.hidden_geometry())
t3 = time.perf_counter()
from grader import runner  # the rest of the harness: sandbox (numpy, torch.func, ...), traps, wire, ...
t4 = time.perf_counter()
runner.grade("reference", ("ex1",))  # first grading in this process: fixtures cached, everything else cold
t5 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)
"""


def run_timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s  (min {min(xs):.3f}, max {max(xs):.3f}, n={len(xs)})"


def part1(runs: int) -> None:
    grade = shutil.which("grade") or "grade"
    commands = {
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
        "grade ex1 --submission reference": [grade, "ex1", "--submission", str(REFERENCE)],
        "grade ex1 (stubs)": [grade, "ex1", "--submission", str(EXERCISES)],
    }
    print(
        f"== 1. end-to-end wall time, subprocesses, {runs} interleaved runs each (+1 discarded warm-up), "
        "median reported =="
    )
    print(f"   python: {sys.executable}   grade: {grade}")
    for cmd in commands.values():  # page the files in once
        run_timed(cmd)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(run_timed(cmd))
    for name, xs in times.items():
        print(f"   {name:36s} {fmt(xs)}")
    base = statistics.median(times["python -c 'import torch'"])
    for name in ("grade ex1 --submission reference", "grade ex1 (stubs)"):
        m = statistics.median(times[name])
        print(f"   ratio {name} / import torch = {m / base:.2f}   (target <= 1.3; overhead {m - base:+.3f} s)")
    print()


def part2(cold_runs: int, warm_runs: int) -> None:
    print("== 2. the harness's own work, in-process ==")
    # 2a. cold fixture build, fresh interpreter each time
    cold = []
    for _ in range(cold_runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        cold.append([float(x) for x in out.stdout.split()])
    imp_torch, imp_fixture, build, imp_runner, cold_grade = (statistics.median(c[i] for c in cold) for i in range(5))
    print(f"   (a) cold, fresh `python -c` x{cold_runs}, medians:")
    print(f"       import torch                                   {imp_torch:.3f} s   (not the harness's work)")
    print(f"       import grader.fixture                          {imp_fixture:.3f} s")
    print(f"       fixture.build(PRIMARY) + build(hidden geometry)  {build:.3f} s   <- fixture + truth, 2 geometries")
    print(f"       import grader.runner (sandbox, traps, wire..)  {imp_runner:.3f} s")
    print(
        f"       first runner.grade(reference, ex1) after that  {cold_grade:.3f} s   (fixtures cached; fork, "
        "exec and first-call op costs cold)"
    )

    import torch

    from grader import fixture, runner
    from grader.sandbox import Limits

    torch.set_num_threads(1)
    fixture.build(fixture.PRIMARY)
    fixture.build(fixture.hidden_geometry())
    limits = Limits()

    # 2b. loading a submission: read sources + fork the sandbox + exec ex1.py in it
    def load_once():
        t0 = time.perf_counter()
        sources = runner.read_sources(REFERENCE, ("ex1",))
        t1 = time.perf_counter()
        session = runner.Session(sources, limits)
        try:
            functions, failed = session.load("ex1")
        finally:
            t2 = time.perf_counter()
            session.close()
        t3 = time.perf_counter()
        assert failed is None and len(functions) >= 26
        return t1 - t0, t2 - t1, t3 - t2

    for _ in range(3):
        load_once()
    loads = [load_once() for _ in range(warm_runs)]
    read_s = statistics.median(x[0] for x in loads)
    load_s = statistics.median(x[1] for x in loads)
    close_s = statistics.median(x[2] for x in loads)
    load_total = statistics.median(x[0] + x[1] + x[2] for x in loads)

    # 2c. grading the 26 items: a warm runner.grade (fixtures cached), which also loads + closes the sandbox
    for _ in range(3):
        runner.grade(REFERENCE, ("ex1",))
    grades = []
    for _ in range(warm_runs):
        t = time.perf_counter()
        result = runner.grade(REFERENCE, ("ex1",))
        grades.append(time.perf_counter() - t)
    grade_s = statistics.median(grades)
    passed = sum(i.status == "passed" for i in result.items)
    items_s = grade_s - load_total

    print(f"   (b) load a submission, warm parent, median of {warm_runs} (after 3 warm-ups):")
    print(f"       read_sources                                   {read_s * 1e3:7.2f} ms")
    print(f"       Session(...).load('ex1') (fork + jail + exec)  {load_s * 1e3:7.2f} ms")
    print(f"       session.close() (kill + reap)                  {close_s * 1e3:7.2f} ms")
    print(
        f"   (c) runner.grade(reference, ex1), warm, median of {warm_runs}: {grade_s * 1e3:.2f} ms "
        f"({passed}/{len(result.items)} passed)"
    )
    print(f"       of which grading the 26 items (grade - load)   {items_s * 1e3:7.2f} ms")
    total = build + load_total + items_s
    print(
        f"   harness total = cold build {build:.3f} + load {load_total:.3f} + items {items_s:.3f} "
        f"= {total:.3f} s   (target < 0.3 s)"
    )
    print(f"   (+ import grader.fixture/runner cold: {imp_fixture + imp_runner:.3f} s, not in the total above)")
    cold_total = imp_fixture + build + imp_runner + cold_grade
    print(
        f"   cold, as one `grade ex1` CLI run pays it: imports {imp_fixture + imp_runner:.3f} + build {build:.3f} "
        f"+ first grade {cold_grade:.3f} = {cold_total:.3f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="subprocess runs per command (median)")
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh interpreters for the cold fixture build")
    ap.add_argument("--warm-runs", type=int, default=20, help="in-process repetitions (median)")
    args = ap.parse_args()
    print(f"bench_grade: {os.cpu_count()} CPUs; timings are noisy, so every figure is a median of repeated runs")
    part1(args.runs)
    part2(args.cold_runs, args.warm_runs)


if __name__ == "__main__":
    main()
