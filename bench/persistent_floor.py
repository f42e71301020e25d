"""What a grading process per student costs, against grading every student in one long-lived process (issue #22).

`grade batch` forks a grading process per student from the warm scheduler, and that process forks the student's
sandbox. A design with one long-lived grading process per slot would fork only the sandbox, from a clean zygote
(a child forked from a long-lived grader would inherit earlier students' code and answers in its memory, so the
zygote is not optional). This measures what that design could save at most, on the same warm process and class:

- per-student process: each student graded in a grading process forked for it (grader.classroom.pool, jobs=1);
- one process: each student graded here, in turn (runner.grade), its sandbox forked from this process.

Both use the truth server (one per run, forked before any student's data), the class's fixed secret and the
real sandbox with every wall. CPU counts this process and every child it reaped (grading processes and the
sandboxes they reaped); the truth server, reaped at the end, is left out of both. Rounds are interleaved and the
median per student is printed, with the difference: the most a zygote design could save per student.

    python bench/persistent_floor.py [--n 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SECRET, build_class  # noqa: E402


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    from grader.classroom import pool
    from grader.grading.runner import grade
    from grader.sandbox import Limits, child, jail
    from grader.spec import catalogue
    from grader.spec.policy import Policy, grade_kwargs
    from grader.truth import fixture, server

    subs = Path(tempfile.mkdtemp(prefix="persistent-floor-")) / "subs"
    build_class(subs, args.n)
    folders = sorted(p for p in subs.iterdir() if p.is_dir())
    policy, limits = Policy(secret=SECRET), Limits(timeout=3.0)
    torch.set_num_threads(1)
    catalogue.build_fixtures(catalogue.select(catalogue.EXERCISES), None, None)
    child.warm_up()
    truth = server.serve()
    gc.freeze()

    def graded(folder: Path) -> dict:
        result = grade(folder, limits=limits, name=folder.name, **grade_kwargs(policy))
        return {"score": result.score, "max": result.max_score}

    scores: dict[str, dict] = {}

    def forked() -> None:
        for folder, result, why in pool.run(folders, graded, jobs=1, deadline=120.0):
            if result is None:
                raise SystemExit(f"CHECK FAILED: {folder.name}: {why}")
            scores.setdefault(folder.name, result)
            if scores[folder.name] != result:
                raise SystemExit(f"CHECK FAILED: {folder.name} scored {result}, not {scores[folder.name]}")

    lecture = dict(fixture.BUILT)  # the lecture's truth, kept; a student's hidden truth is dropped after them

    def here() -> None:
        for folder in folders:
            result = graded(folder)
            fixture.BUILT.clear()
            fixture.BUILT.update(lecture)
            scores.setdefault(folder.name, result)
            if scores[folder.name] != result:
                raise SystemExit(f"CHECK FAILED: {folder.name} scored {result}, not {scores[folder.name]}")

    phases = {"per-student process": forked, "one process": here}
    cpu: dict[str, list[float]] = {k: [] for k in phases}
    print(f"persistent_floor: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {len(folders)} students")
    try:
        with jail.held():
            for r in range(args.rounds):
                for name in list(phases)[r % 2 :] + list(phases)[: r % 2]:
                    start = _cpu()
                    phases[name]()
                    cpu[name].append((_cpu() - start) / len(folders) * 1e3)
    finally:
        truth.close()
    for name, values in cpu.items():
        print(
            f"   {name:22s} {statistics.median(values):6.1f} ms of CPU per student (rounds: "
            f"{', '.join(f'{v:.1f}' for v in values)})"
        )
    saved = statistics.median(cpu["per-student process"]) - statistics.median(cpu["one process"])
    print(f"   a grading process per student costs {saved:.1f} ms: the most one long-lived grader per slot could save")


if __name__ == "__main__":
    main()
