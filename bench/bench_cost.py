"""What `grade batch` costs per student, by role: wall rate, CPU and page faults, at two class sizes (issue #22).

Builds a class of N full submissions (bench/common.build_class: half correct, half one tests/corpus trap each,
wrong shapes among them), runs the real `grade batch SUBS --out OUT --jobs 2 --timeout 3` (similarity on unless
--no-similarity) and counts every process: the whole tree's CPU and minor faults from wait4, and each role's own
from the line it appends to GRADER_COST_LOG as it ends (grader/sandbox/costs.py): the scheduler, each grading
process, the sandboxes each one reaped, the truth server, the background children (the similarity check, the
--resume digests); the rest is the difference.

    python bench/bench_cost.py [--n 200] [--big 2000] [--jobs 2] [--no-similarity] [--rounds 1]

--rounds K runs each class K times and prints the medians and ranges as well: this machine's speed drifts by half
within an hour, so one run says little alone. Right before each run, the CPU of `python -c "import torch"` (median
of three) is measured too, and each run's CPU per student is also given in thousandths of it: a yardstick taken in
the same minute, which shows whether a dear run was a slow moment of the machine or of the grader. With --big, each
round runs both classes, in a shuffled order, and the larger class's CPU per student is compared with the smaller
one's of the same round (paired ratios, their median and range): classes run an hour apart compare the machine's
moments, not the grader's scaling.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    PYTHON,
    build_class,
    check_outdir,
    clean_env,
    compile_bytecode,
    describe,
    grade_cmd,
    ratios,
)

ROLES = ("scheduler", "grading", "zygote", "sandboxes", "truth", "background", "the rest")


def run_once(subs: Path, out: Path, jobs: int, similarity: bool) -> dict:
    """Run grade batch once; return wall seconds, the tree's CPU and faults, and CPU by role."""
    log = out.parent / f"{out.name}.costs"
    log.unlink(missing_ok=True)
    cmd = [*grade_cmd(), "batch", str(subs), "--out", str(out), "--jobs", str(jobs), "--timeout", "3"]
    if not similarity:
        cmd.append("--no-similarity")
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=clean_env(GRADER_COST_LOG=str(log)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"grade batch failed ({status}): {err[-2000:]}")
    total = usage.ru_utime + usage.ru_stime
    roles = collections.Counter()
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        roles[entry["role"]] += entry["user"] + entry["system"]
    roles["the rest"] = total - sum(roles.values())  # what logged no line of its own
    return {"wall": wall, "cpu": total, "minflt": usage.ru_minflt, "roles": roles}


def yardstick() -> float:
    """Return the CPU seconds of `python -c "import torch"`, the median of three runs, children included."""
    cpu = []
    for _ in range(3):
        proc = subprocess.Popen([PYTHON, "-c", "import torch"], env=clean_env())
        _, status, usage = os.wait4(proc.pid, 0)
        if status:
            raise SystemExit(f"CHECK FAILED: python -c 'import torch' exited with {status}")
        cpu.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(cpu)


def report(n: int, got: dict, torch_cpu: float) -> float:
    per = 1000 * got["cpu"] / n
    print(
        f"  {n} students: {got['wall']:.1f} s wall, {n / got['wall']:.1f} subs/s; CPU {got['cpu']:.1f} s "
        f"= {per:.1f} ms per student; {got['minflt'] / n:,.0f} minor page faults per student"
    )
    print(
        f"    yardstick: `import torch` took {torch_cpu:.2f} s of CPU just before; a student cost "
        f"{per / torch_cpu:.1f} thousandths of it"
    )
    print(
        "    by role, ms of CPU per student: "
        + ", ".join(f"{role} {1000 * got['roles'].get(role, 0.0) / n:.1f}" for role in ROLES)
    )
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--big", type=int, default=2000, help="the larger class (0: skip)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-similarity", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, each of every class once in a shuffled order")
    args = ap.parse_args()
    print(
        f"bench_cost: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
        + compile_bytecode(Path(__file__).resolve().parents[1])
    )
    sizes = [args.n] + ([args.big] if args.big else [])
    runs: dict[int, list] = {n: [] for n in sizes}  # per round: (ms per student, subs/s, thousandths)
    with tempfile.TemporaryDirectory(prefix="bench_cost_") as tmp:
        classes = {n: (Path(tmp) / f"class{n}" / "subs") for n in sizes}
        students = {n: build_class(classes[n], n) for n in sizes}
        rng = random.Random(12)  # as common.paired: the same shuffled orders each time
        for k in range(args.rounds):
            for n in rng.sample(sizes, len(sizes)):  # paired and interleaved: both classes in the same minutes
                out = Path(tmp) / f"out{n}_{k}"
                torch_cpu = yardstick()
                got = run_once(classes[n], out, args.jobs, not args.no_similarity)
                check_outdir(out, students[n])  # every verdict as its case pins it
                per = report(n, got, torch_cpu)
                runs[n].append((per, n / got["wall"], per / torch_cpu))
    if args.rounds > 1:  # this machine's speed drifts: one run says little alone
        for n in sizes:
            cpu, rates = [r[0] for r in runs[n]], [r[1] for r in runs[n]]
            print(f"  {n} students: {describe(cpu, 'ms per student', digits=1)}, {describe(rates, 'subs/s', digits=1)}")
    if args.big:
        small, big = runs[args.n], runs[args.big]
        paired = ratios([r[0] for r in big], [r[0] for r in small])
        scaled = ratios([r[2] for r in big], [r[2] for r in small])
        print(
            f"  CPU per student at {args.big} against {args.n}, paired by round: {describe(paired, 'x', digits=2)}; "
            f"in thousandths of each run's own yardstick: {describe(scaled, 'x', digits=2)}"
        )


if __name__ == "__main__":
    main()
