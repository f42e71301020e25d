"""The most `grade batch` could reach with issue #8's isolation: its processes and walls, with free grading around them.

`grade batch` gives every student a grading process of their own and every exercise a fresh walled child (issue
#8: no state between exercises, children forked from a process that never held another student's data). This
script runs those processes exactly as `grade batch` does (the same warm, huge-paged scheduling process,
grader.classroom.pool with --jobs 2, the jail and its slot rooms, four sandboxes per student started through
sandbox.Worker, each entering every wall and executing a file), but takes the grading out or does it without a
sandbox, so the figures are upper bounds that no work inside that design can pass:

- process: a grading process per student that does nothing;
- bare forks: the same, plus four plain fork-and-exits of it (a process per exercise, with no wall at all);
- walls: the same, plus four sandboxes that each load a one-line file, then close (the isolation alone);
- in-process: a grading process per student that grades all four exercises in itself, with the runner's own
  judging and no sandbox (bench/sandbox_cost.py's comparator; the lecture geometry's truth, already built);
- walls + in-process: both in one grading process, which is the whole of `grade batch` minus the wire,
  the child-side setup per call, each student's own hidden-geometry truth and the similarity check;
- the floor: the walls, plus the CPU spent inside the students' own code (their files executed and their functions
  called, timed within the in-process phase), plus building one student's hidden-geometry truth (timed here, warm):
  what any grader with these walls must spend per student before it judges anything; and that plus the similarity
  check (run here once over the same students), which `grade batch` runs by default and bench_batch times.

Each phase is timed over the same class, interleaved over rounds; subs/s is N over the median wall time, and
the CPU per student counts every process (grading processes and sandboxes, from getrusage). The bound printed
last is the larger of the measured rate and the rate if every core were busy (cores / CPU per student). The
bench class's fixed secret draws one hidden geometry for every student (grade batch draws one per student and
builds its truth in a server: more work, left out here). The class is one
bench_batch built (`--keep`), without hostile cases: in-process grading runs student code unsandboxed.

    python bench/isolation_floor.py --subs CLASS/subs [--n 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sandbox_cost  # noqa: E402
from common import SECRET  # noqa: E402

from grader.classroom import (
    batch,  # noqa: E402
    pool,
)
from grader.classroom.reports import class_similarity  # noqa: E402
from grader.sandbox import Limits, Worker, jail, pages, reap  # noqa: E402
from grader.spec import catalogue
from grader.submissions.intake import discover  # noqa: E402
from grader.submissions.sources import Source  # noqa: E402
from grader.truth import fixture

EXERCISES = ("ex1", "ex2", "ex3", "ex4")
TARGETS = {"issue #8": 30.0, "issue #12": 40.0}


def _walls() -> None:
    workers = [Worker(Limits(timeout=3)) for _ in EXERCISES]  # forked first, as Session.prestart does
    try:
        for ex, worker in zip(EXERCISES, workers, strict=True):
            reply = worker.ask({"op": "load", "path": f"{ex}.py", "text": "x = 1\n"})
            if not reply.ok or not reply.header.get("ok"):
                raise RuntimeError(f"a sandbox did not load a one-line file: {reply.failure} {reply.header}")
    finally:
        for worker in workers:
            worker.close()
        reap(wait=True)


def _bare_forks() -> None:
    for _ in EXERCISES:  # a plain fork and exit of this warm process: no walls, no work
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


_STUDENT_CPU = [0.0]  # CPU seconds inside the students' own code (their files executed, their functions called)


def _timed(fn):
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _STUDENT_CPU[0] += time.process_time() - start

    return timed


sandbox_cost._call = _timed(sandbox_cost._call)  # the student's function itself, inputs already copied
sandbox_cost._Files.exec_file = _timed(sandbox_cost._Files.exec_file)  # compiling and executing the file


def _in_process(folder: Path) -> dict:
    _STUDENT_CPU[0] = 0.0
    result = sandbox_cost.grade_in_process(folder)
    if folder.name.endswith("_correct") and result.score != result.max_score:
        raise RuntimeError(f"{folder.name}: the reference scored {result.score}/{result.max_score} in-process")
    return {"student_cpu": _STUDENT_CPU[0]}


PHASES = {
    "process": lambda folder: {},
    "bare forks": lambda folder: (_bare_forks(), {})[1],
    "walls": lambda folder: (_walls(), {})[1],
    "in-process": _in_process,
    "walls + in-process": lambda folder: (_walls(), _in_process(folder))[1],
}
_STUDENT_CODE: list[float] = []  # per student, from the in-process phases


def _truth_per_student(draws: int = 10) -> float:
    """Return the median CPU seconds to build one student's hidden-geometry truth here, warm, as the server does."""
    calls = catalogue.select(catalogue.EXERCISES)
    took = []
    for k in range(draws):
        draw = catalogue.Draw.of(SECRET, {"ex1": Source("ex1", f"ex1_{k}.py", f"# draw {k}\n")})
        start = time.process_time()
        for call in calls:
            for g in catalogue.geometries(call, draw)[1:]:
                fixture.build(g, None, call.ex4)
        took.append(time.process_time() - start)
    return statistics.median(took)


def _similarity_per_student(folders: list[Path]) -> float:
    """Return the CPU seconds per student of grade batch's similarity check on these students, run here once."""
    entries, _ = discover(folders[0].parent)
    wanted = {f.name for f in folders}
    entries = [e for e in entries if e.student in wanted]
    start = time.process_time()
    class_similarity(entries)
    return (time.process_time() - start) / len(entries)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _run(phase: str, folders: list[Path], jobs: int) -> tuple[float, float]:
    """Run one phase over the class; return (wall seconds, CPU seconds of every process)."""
    cpu, start = _cpu(), time.perf_counter()
    for folder, result, why in pool.run(folders, PHASES[phase], jobs=jobs, deadline=120.0):
        if result is None:
            raise SystemExit(f"CHECK FAILED: {phase} on {folder.name}: {why}")
        if "student_cpu" in result:
            _STUDENT_CODE.append(result["student_cpu"])
    return time.perf_counter() - start, _cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subs", type=Path, required=True, help="a class built by bench_batch, without hostile cases")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    folders = sorted(p for p in args.subs.iterdir() if p.is_dir() and not p.name.startswith("h_"))[: args.n]
    load = os.getloadavg()[0]
    print(f"isolation_floor: {len(folders)} students, --jobs {args.jobs}, {args.rounds} rounds, load {load:.2f}")
    # the scheduling process as grade_batch prepares it, with the bench class's fixed secret (one hidden geometry)
    torch.set_num_threads(1)
    catalogue.build_fixtures(catalogue.select(catalogue.EXERCISES), None, None)
    batch._warm_up()
    for folder in folders[:2]:  # the in-process comparator's first-call costs, paid here
        sandbox_cost.grade_in_process(folder)
    if len(folders) >= batch.COLLAPSE_FROM:
        collapsed = pages.collapse_heap()
        print(f"   heap collapsed into huge pages: {collapsed >> 20} MiB, as grade batch does from 100 students")
    walls, cpus = {p: [] for p in PHASES}, {p: [] for p in PHASES}
    with jail.held():
        for r in range(args.rounds):
            order = list(PHASES) if r % 2 == 0 else list(reversed(PHASES))
            for phase in order:
                wall, cpu = _run(phase, folders, args.jobs)
                walls[phase].append(wall)
                cpus[phase].append(cpu)
    n = len(folders)
    print(f"\n   {'phase':22s} {'subs/s (median wall)':>22s} {'wall range s':>14s} {'CPU per student':>16s}")
    for phase in PHASES:
        w = statistics.median(walls[phase])
        print(
            f"   {phase:22s} {n / w:22.1f} {min(walls[phase]):6.2f}-{max(walls[phase]):<6.2f} "
            f"{statistics.median(cpus[phase]) / n * 1e3:13.1f} ms"
        )
    cores = os.cpu_count() or 1
    measured = n / statistics.median(walls["walls + in-process"])
    cpu_bound = cores * n / statistics.median(cpus["walls + in-process"])  # every core busy, no waiting
    print(f"   walls + in-process: {measured:.1f} subs/s measured, {cpu_bound:.1f} with every core busy")
    # what no grader with these walls can skip: the walls, the students' own code, each student's own truth
    walls_ms = statistics.median(cpus["walls"]) / n * 1e3
    student_ms = statistics.median(_STUDENT_CODE) * 1e3
    truth_ms = _truth_per_student() * 1e3
    floor_ms = walls_ms + student_ms + truth_ms
    print(
        f"   the walls {walls_ms:.1f} ms + the students' own code {student_ms:.1f} ms (median per student) + "
        f"their hidden-geometry truth {truth_ms:.1f} ms = {floor_ms:.1f} ms of CPU per student: "
        f"{cores * 1e3 / floor_ms:.1f} subs/s with judging, the wire and similarity free"
    )
    sim_ms = _similarity_per_student(folders) * 1e3
    print(
        f"   + the similarity check, on in grade batch's default run (bench_batch's): {sim_ms:.1f} ms = "
        f"{floor_ms + sim_ms:.1f} ms: {cores * 1e3 / (floor_ms + sim_ms):.1f} subs/s with judging and the wire free"
    )
    best = cores * 1e3 / (floor_ms + sim_ms)  # the floor is below every measured phase that includes it
    for issue, target in TARGETS.items():
        verdict = "reachable" if best >= target else "out of reach"
        print(
            f"   {issue}'s {target:g} subs/s (grade batch as bench_batch runs it) against this design's bound of "
            f"{best:.1f}: {verdict} (with --no-similarity the bound is {cores * 1e3 / floor_ms:.1f})"
        )


if __name__ == "__main__":
    main()
