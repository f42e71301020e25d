"""Where the time of `grade ex1 --submission reference`, and of one submission in `grade batch`, goes.

Wraps the grader's own functions with timers (nothing in grader/ is edited; the wrappers are installed before
any sandbox forks, so a child's setup is timed too and reported over its output pipe), then:

1. `grade ex1 --submission reference` in a fresh interpreter, driven through the CLI, with phases from process
   spawn (interpreter start, imports, fixtures, sandbox, calls, judging, output) to reap (the exit teardown is
   the wall time after the CLI returned). The run's exit status and score line are checked. Median of --runs.
   To wrap the grader's functions, it imports their modules before `grader.cli.run` forks the truth server and
   the sandbox ahead, which `grade ex1` does first: so here the grading starts sooner after those forks, and
   waits longer for them (the truth ~100 ms, against ~3 ms in the real order on 2 cores).
2. One submission as `grade batch` grades it: a warm parent (fixtures built, torch on one thread, the jail held),
   the student's grading process forked by grader.classroom.pool, runner.grade inside it. Per-submission breakdown for a
   correct and a trap submission, medians over --reps.
3. `grade batch` of a class (common.build_class) in a fresh interpreter: the scheduling process's phases
   (discover, digests, fixtures, grading loop, outputs, similarity, report, exit), every run's outputs checked.
4. `grade ex4 --full`'s SGD loop (training.sgd with the reference backward) in this process: per-step time, the
   top torch ops by their own CPU time (torch.profiler), and the top Python functions (cProfile).
5. perf stat of `python -c "import torch"`, `grade ex1 --submission reference` and `grade batch` of the class:
   CPU time (task-clock, children included), context switches, migrations, page faults; CPU ms per submission.
With --cprofile, also the top functions of a cProfile of part 1's CLI (parent side only).

    python bench/profile_grade.py [--runs 5] [--reps 20] [--cprofile] [--class-n 200] [--only ex1|batch|class]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, REFERENCE, ROOT, clean_env, traps, write_student  # noqa: E402

TIMES: dict[str, list[float]] = defaultdict(list)  # label -> seconds of every call in this process
MARK = "@@bench "


def timed(owner, name: str, label: str | None = None, child: bool = False):
    """Replace owner.name with a wrapper that records its wall time under label (printed, in a sandbox child).

    A name this version of the grader does not have is skipped (the grader changes under the benchmark).
    """
    fn = getattr(owner, name, None)
    if fn is None:
        return
    label = label or name

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t
            if child and IN_SANDBOX[0]:
                print(f"{MARK}{label} {dt}", flush=True)  # a sandbox child: its output goes to the parent
            else:
                TIMES[label].append(dt)

    setattr(owner, name, wrapper)


IN_SANDBOX = [False]  # set in a sandbox child as it starts (see install)


def install() -> None:
    """Wrap the grader's costly steps, parent side and sandbox-child side."""
    from grader.grading import compare, runner, traps
    from grader.sandbox import child, jail, wire, worker
    from grader.show import table as report
    from grader.truth import corpus, fixture

    try:
        from grader.truth import server as prebuild
    except ImportError:  # an older checkout: built the truth in the grading process
        prebuild = None
    timed(fixture, "build", "fixture.build (truth, both geometries)")
    timed(prebuild, "finish", "waiting for the truth (server or helper), read into the arena")
    timed(corpus, "load", "  corpus.load (names; cached after the first)")
    timed(corpus.Corpus, "split", "  Corpus.split (shuffle 80/10/10)")
    timed(fixture, "autograd_truth", "  fixture.autograd_truth (loss.backward)")
    timed(worker, "_probe", "sandbox probe (protections, a throwaway child)")
    timed(worker.Worker, "__init__", "Worker start (fork the sandbox child)")
    timed(worker.Worker, "close", "Worker close (kill, non-blocking reap)")
    timed(worker, "reap", "reap children")
    runner.reap = worker.reap
    timed(runner, "judge", "judge (compare + traps)")
    timed(runner, "judge_training", "judge_training")
    timed(traps, "diagnose", "traps.diagnose (failing items)")
    timed(compare, "compare", "compare.compare")
    timed(wire.Encoder, "value", "wire encode (parent side; a dict counts its entries again)")
    timed(runner, "_outcome", "decode reply + mutation check")
    timed(runner, "conclude", "render messages (conclude)")
    timed(report, "emit_table", "print the table")
    timed(jail, "jail", "make the jail dir")
    depth = [0]

    def strip_marks(reply):
        """Move a child's timing lines out of a reply's output into TIMES."""
        kept = []
        for line in reply.output.splitlines(True):
            if line.startswith(MARK):
                label, _, value = line[len(MARK) :].rpartition(" ")
                TIMES[f"  child: {label}"].append(float(value))
            else:
                kept.append(line)
        reply.output = "".join(kept)

    def wrap_ask(name: str):
        real = getattr(worker.Worker, name, None)
        if real is None:
            return

        @functools.wraps(real)
        def timed_ask(self, request, *args, **kwargs):
            depth[0] += 1
            t = time.perf_counter()
            try:
                got = real(self, request, *args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:  # ask() may call ask_many(): count the request once
                replies = got if isinstance(got, list) else [got]
                TIMES[f"round trip: {request.get('op')}"].append(time.perf_counter() - t)
                TIMES[f"#replies: {request.get('op')}"].append(len(replies))
                for reply in replies:
                    strip_marks(reply)
            return got

        setattr(worker.Worker, name, timed_ask)

    wrap_ask("ask")
    wrap_ask("ask_many")
    real_main = child.child_main

    @functools.wraps(real_main)
    def child_main(*args, **kwargs):
        IN_SANDBOX[0] = True
        return real_main(*args, **kwargs)

    child.child_main = child_main
    timed(child, "scrub_secrets", "scrub the truth (copy-on-write)", child=True)
    timed(child, "warm_up", "warm_up (torch's lazy imports)", child=True)
    timed(jail, "enter", "jail.enter (namespaces, chroot, uid, rlimits)", child=True)
    timed(child, "install_autograd_tripwires", "tripwires", child=True)
    timed(child.ChildServer, "load", "exec the exercise file", child=True)
    timed(child.ChildServer, "call", "call: student function + encode", child=True)


def table(per_rep: list[dict[str, list[float]]], title: str = "") -> None:
    """Print, for every label, the median over reps of its call count and of its total time; largest first."""
    if title:
        print(title)
    labels = {k for rep in per_rep for k in rep if not k.startswith("#")}

    def med(label: str, f) -> float:
        return statistics.median(f(rep.get(label, [])) for rep in per_rep)

    rows = sorted(labels, key=lambda k: -med(k, sum))
    for label in rows:
        print(f"   {label:52s} {med(label, len):6.1f} calls  {med(label, sum) * 1e3:8.2f} ms total")
    work = med("  child: call: student function + encode", sum)
    calls = med("  child: call: student function + encode", len)
    trips = [k for k in labels if k.startswith("round trip:") and k != "round trip: load"]
    n_trips = statistics.median(sum(len(rep.get(k, [])) for k in trips) for rep in per_rep)
    t_trips = statistics.median(sum(sum(rep.get(k, [])) for k in trips) for rep in per_rep)
    if n_trips and calls:
        print(
            f"   => per request (load excluded), round trip beyond the child's own call work (IPC, decode, wakeups): "
            f"{(t_trips - work) / n_trips * 1e3:.3f} ms over {n_trips:.0f} requests carrying {calls:.0f} calls"
        )
    if med("round trip: load", len):
        per_load = med("round trip: load", sum) / med("round trip: load", len)
        print(f"   => per sandbox, fork-to-loaded latency (round trip: load): {per_load * 1e3:.2f} ms")


# ---------------------------------------------------------------------------------------------------------------
# 1. grade ex1 --submission reference, one fresh process


def inner_cli(spawned_at: float, argv: list[str], cprofile: bool) -> None:
    """Run inside the fresh interpreter: time the imports, install the timers, run the CLI, report on stderr."""
    started = time.time()
    t = time.perf_counter()
    import torch  # noqa: F401

    TIMES["import torch"].append(time.perf_counter() - t)
    t = time.perf_counter()
    from grader.cli import main as cli

    TIMES["import grader.cli.main (+ click)"].append(time.perf_counter() - t)
    t = time.perf_counter()
    import grader.grading.runner  # noqa: F401
    import grader.sandbox.child  # noqa: F401

    TIMES["import grader.grading.runner, sandbox.child (numpy, torch.func ...)"].append(time.perf_counter() - t)
    n_mods = len(sys.modules)
    install()
    if argv[0] == "batch":
        install_batch()
    prof = None
    if cprofile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t = time.perf_counter()

    def report(code) -> None:
        TIMES["CLI total (parse, grade, write, print)"].append(time.perf_counter() - t)
        if prof is not None:
            prof.disable()
            prof.dump_stats(os.environ["BENCH_PROFILE_OUT"])
        sys.stdout.flush()
        rep = {
            "spawned_at": spawned_at,
            "started": started,
            "ended": time.time(),
            "code": code,
            "modules_before_cli": n_mods,
            "modules_after": len(sys.modules),
            "sympy": "sympy" in sys.modules,
            "exit": "os._exit via cli.run" if hasattr(cli, "run") else "normal interpreter exit",
            "times": TIMES,
        }
        print(MARK + json.dumps(rep), file=sys.stderr, flush=True)

    if hasattr(cli, "run"):  # the console script's entry: exit handlers, then os._exit (no torch teardown)
        import atexit

        import grader.cli as entry

        atexit.register(report, None)  # registered first, so it runs after the grader's own exit handlers
        sys.argv = ["grade", *argv]
        # grader.cli.run, as the console script calls it: it forks the truth server and the sandbox ahead
        (entry.run if hasattr(entry, "run") else cli.run)()
    code = 0
    try:
        cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    report(code)
    sys.exit(code)


def install_batch() -> None:
    """Wrap the phases of grade batch that run in the scheduling process."""
    from grader.classroom import batch, pool, reports
    from grader.classroom.reports import similarity

    timed(batch, "grade_batch", "grade_batch (all of it)")
    timed(batch, "discover", "  discover the entries")
    timed(pool, "in_child", "  digests, read in a throwaway child")
    timed(pool, "run", "  pool.run (start the generator)")
    timed(batch, "write_outputs", "  write_outputs (gradebook, summary, similarity, html)")
    timed(pool.Background, "result", "    waiting for background helpers (similarity; report.html)")
    timed(similarity, "compare_class", "    similarity (copydetect)")
    timed(similarity, "_fingerprint", "      fingerprint one function (Pygments tokens, k-grams)")
    timed(similarity, "_compare", "      compare one pair of students")
    timed(similarity, "compare_files", "        copydetect.compare_files (pairs sharing a k-gram)")
    timed(reports, "html_report", "    report.html")
    timed(reports, "summarize", "    summary")
    timed(batch, "_write_json", "  write students/*.json (+ manifest)")


def part1(runs: int, cprofile: bool) -> None:
    print(f"== 1. `grade ex1 --submission reference`, instrumented, in a fresh interpreter; median of {runs} runs ==")
    check = "score 26/26: 26 passed"
    argv = ["ex1", "--submission", str(REFERENCE)]
    instrumented(argv, runs, cprofile, lambda p: p.returncode == 0 and check in p.stdout)
    wrong = next(t for t in traps() if t.path.stem == "dbnmeani_lecture_no_keepdim")
    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    folder = write_student(tmp / "wrong_shape", "ex1", wrong.path.read_text())
    print(f"\n   the same with one wrong-shape gradient ({wrong.path.name}); median of {runs} runs:")
    check2 = "score 25/26: 25 passed, 1 failed"
    instrumented(["ex1", "--submission", str(folder)], runs, False, lambda p: p.returncode == 1 and check2 in p.stdout)
    shutil.rmtree(folder.parent, ignore_errors=True)


def part3(n: int, runs: int) -> None:
    """Profile the scheduling process of `grade batch` on a class of n."""
    from common import build_class, check_outdir

    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-batch-"))
    students = build_class(tmp / "class" / "subs", n)
    out = tmp / "out"
    print(
        f"\n== 3. `grade batch` of {n} full submissions (--jobs 2 --timeout 3), instrumented scheduling process, "
        f"fresh interpreter; median of {runs} runs; the grading itself runs in forked processes =="
    )

    def ok(p) -> bool:
        check_outdir(out, students)
        shutil.rmtree(out)
        return p.returncode == 0

    argv = ["batch", str(tmp / "class" / "subs"), "--out", str(out), "--jobs", "2", "--timeout", "3"]
    instrumented(argv, runs, False, ok)
    shutil.rmtree(tmp, ignore_errors=True)


def instrumented(argv: list[str], runs: int, cprofile: bool, ok) -> None:
    """Run the CLI instrumented in fresh interpreters (one unrecorded warm-up) and print the phase medians."""
    collected: dict[str, list[float]] = defaultdict(list)
    prof_out = Path(tempfile.mkstemp(suffix=".prof")[1])
    for k in range(runs + 1 + cprofile):
        spawned = time.time()
        cmd = [PYTHON, str(Path(__file__).resolve()), "--inner", str(spawned), json.dumps(argv)]
        if cprofile and k == runs + 1:
            cmd.append("--cprofile")
        p = subprocess.run(
            cmd, cwd=ROOT, env=clean_env(BENCH_PROFILE_OUT=str(prof_out)), capture_output=True, text=True
        )
        reaped = time.time()
        if not ok(p):
            tail = p.stdout[-1000:] + p.stderr[-2000:]
            raise SystemExit(f"the instrumented run failed (exit {p.returncode}):\n{tail}")
        line = next(x for x in p.stderr.splitlines() if x.startswith(MARK))
        rep = json.loads(line[len(MARK) :])
        if k == 0 or k == runs + 1:
            continue  # the first run pages the files in; the cProfile run is slower
        collected["interpreter start (spawn to first line)"].append(rep["started"] - rep["spawned_at"])
        collected[f"exit ({rep['exit']}): after the CLI's last line, to reap"].append(reaped - rep["ended"])
        collected["whole process (spawn to reap)"].append(reaped - spawned)
        for label, xs in rep["times"].items():
            collected[label].append(sum(xs))
            collected[f"#{label}"].append(len(xs))
    print(
        f"   modules: {rep['modules_before_cli']} loaded before the CLI ran, {rep['modules_after']} at exit; "
        f"sympy loaded: {rep['sympy']}"
    )
    if "grade_batch (all of it)" in collected:
        parts = [
            "  discover the entries",
            "  digests, read in a throwaway child",
            "  write_outputs (gradebook, summary, similarity, html)",
            "fixture.build (truth, both geometries)",
            "make the jail dir",
            "sandbox probe (protections, a throwaway child)",
        ]
        rest = [
            total - sum(collected[p][k] for p in parts if p in collected)
            for k, total in enumerate(collected["grade_batch (all of it)"])
        ]
        collected["  => grading loop (grade_batch minus the phases above; forked workers)"] = rest
    labels = [k for k in collected if not k.startswith("#")]
    labels.sort(key=lambda k: -statistics.median(collected[k]))
    for label in labels:
        xs = collected[label]
        count = collected.get(f"#{label}")
        n = f"{statistics.median(count):5.0f}x" if count else "      "
        print(
            f"   {label:56s} {n} {statistics.median(xs) * 1e3:8.1f} ms  (range {min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f})"
        )
    if cprofile:
        import pstats

        print("\n   cProfile of the CLI (parent process only, one run; cumulative time, top 25):")
        stats = pstats.Stats(str(prof_out))
        stats.sort_stats("cumulative").print_stats(25)
    prof_out.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------------------------
# 2. one submission as grade batch grades it


def part2(reps: int) -> None:
    import torch

    from grader.classroom import pool
    from grader.grading import runner
    from grader.sandbox import Limits, jail
    from grader.spec import catalogue
    from grader.spec.policy import Policy

    install()
    torch.set_num_threads(1)
    limits = Limits(timeout=3.0)
    catalogue.build_fixtures(catalogue.select(catalogue.EXERCISES), None, None)  # the graded geometry, as a batch
    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    wrong = next(t for t in traps() if t.path.stem == "dhpreact_tanh_preact")
    trap = write_student(tmp / "trap", wrong.exercise, wrong.path.read_text())
    subs = {"correct (reference)": write_student(tmp / "correct"), f"trap ({wrong.exercise}/{wrong.path.stem})": trap}
    print(
        f"\n== 2. one full submission as `grade batch` grades it: warm parent, jail held, a grading process forked "
        f"per student (grader.classroom.pool), runner.grade in it; {reps} reps each =="
    )
    with jail.held():
        for label, folder in subs.items():

            def grade_one(_, folder=folder):
                return runner.grade(folder, limits=limits, policy=Policy()).to_dict()

            for _ in range(2):  # warm
                runner.grade(folder, limits=limits)
            walls, pooled, per_rep = [], [], []
            for _ in range(reps):
                TIMES.clear()
                t = time.perf_counter()
                result = runner.grade(folder, limits=limits)
                walls.append(time.perf_counter() - t)
                per_rep.append({k: list(v) for k, v in TIMES.items()})
                t = time.perf_counter()
                ((_, res, why),) = list(pool.run([None], grade_one, jobs=1, deadline=600, retries=0))
                pooled.append(time.perf_counter() - t)
                if res is None:
                    raise SystemExit(f"the pooled grading failed: {why}")
            if label.startswith("correct") and result.score != result.max_score:
                raise SystemExit("the reference did not pass everything")
            print(f"\n   {label}: {result.score:g}/{result.max_score:g}")
            print(f"   runner.grade in this process: median {statistics.median(walls) * 1e3:.1f} ms")
            print(
                f"   the same in a forked grading process (pool.run, one job): median "
                f"{statistics.median(pooled) * 1e3:.1f} ms -> pool overhead (fork, JSON, exit, wait) "
                f"{(statistics.median(pooled) - statistics.median(walls)) * 1e3:.1f} ms"
            )
            table(per_rep, title=f"   per submission, median over the {reps} in-process runs:")


def part4(steps: int) -> None:
    """Profile `grade ex4 --full`'s loop (training.sgd with the reference backward) by torch op and Python function."""
    import cProfile
    import importlib.util
    import pstats

    import torch
    from torch.profiler import ProfilerActivity, profile

    from grader.training import sgd as training
    from grader.truth import corpus

    spec = importlib.util.spec_from_file_location("reference_ex4", REFERENCE / "ex4.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    words = corpus.load(None)
    torch.set_num_threads(1)
    training.sgd(module.backward, words, 200)  # warm
    _, _, _, plain = training.sgd(module.backward, words, steps)
    print(
        f"\n== 4. `grade ex4 --full`'s loop in this process (training.sgd, reference backward, one thread): "
        f"{plain / steps * 1e3:.4f} ms per step over {steps} steps without a profiler =="
    )
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        training.sgd(module.backward, words, steps)
    events = prof.key_averages()
    ops = sorted((e for e in events if e.key.startswith("aten::")), key=lambda e: -e.self_cpu_time_total)
    total_ops = sum(e.self_cpu_time_total for e in ops) / steps
    print(f"   torch ops' own CPU time per step (torch.profiler): {total_ops / 1e3:.4f} ms; top 12:")
    for e in ops[:12]:
        print(f"      {e.key:34s} {e.count / steps:5.1f} calls/step  {e.self_cpu_time_total / steps:7.1f} us/step")
    prof2 = cProfile.Profile()
    prof2.enable()
    training.sgd(module.backward, words, steps)
    prof2.disable()
    print("   cProfile (Python functions, tottime, top 12):")
    stats = pstats.Stats(prof2)
    stats.sort_stats("tottime").print_stats(12)


EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")


def perf_stat(cmd: list[str], runs: int, ok) -> dict[str, list[float]]:
    """Run a command under `perf stat` (children included) runs times; return every event's values."""
    got: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(
            ["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "--", *cmd],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
        )
        got["wall ms"].append((time.perf_counter() - t) * 1e3)
        if not ok(p):
            raise SystemExit(f"perf stat of {cmd} failed (exit {p.returncode}):\n{p.stdout[-800:]}{p.stderr[-800:]}")
        for line in p.stderr.splitlines():
            parts = line.split(",")
            if len(parts) > 2 and parts[2] in EVENTS and parts[0] not in ("<not counted>", "<not supported>"):
                got[parts[2]].append(float(parts[0]))
    return got


def part5(runs: int, class_n: int) -> None:
    """Count CPU time, context switches and page faults of whole commands with perf stat (children included)."""
    import shutil as sh

    if sh.which("perf") is None:
        print("\n== 5. perf stat: perf is not installed here ==")
        return
    from common import build_class, check_outdir, grade_cmd

    print(f"\n== 5. perf stat (software events, every child process included), median of {runs} runs ==")
    tmp = Path(tempfile.mkdtemp(prefix="bench-perf-"))
    students = build_class(tmp / "class" / "subs", class_n)
    out = tmp / "out"

    def batch_ok(p) -> bool:
        check_outdir(out, students)
        sh.rmtree(out)
        return p.returncode == 0

    commands = [
        ("python -c 'import torch'", [PYTHON, "-c", "import torch"], lambda p: p.returncode == 0),
        (
            "grade ex1 --submission reference",
            [*grade_cmd(), "ex1", "--submission", str(REFERENCE)],
            lambda p: p.returncode == 0 and "score 26/26: 26 passed" in p.stdout,
        ),
        (
            f"grade batch ({class_n}) --jobs 2 --timeout 3",
            [*grade_cmd(), "batch", str(tmp / "class" / "subs"), "--out", str(out), "--jobs", "2", "--timeout", "3"],
            batch_ok,
        ),
    ]
    for label, cmd, ok in commands:
        got = perf_stat(cmd, runs, ok)
        cells = ", ".join(f"{k} {statistics.median(v):,.0f}" for k, v in got.items())
        print(f"   {label}: {cells}")
        if label.startswith("grade batch"):
            cpu, faults = statistics.median(got["task-clock"]), statistics.median(got["page-faults"])
            print(
                f"      => per submission, fixed costs (import, fixtures, similarity, report) included: CPU "
                f"{cpu / class_n:.1f} ms, page faults {faults / class_n:,.0f}"
            )
    sh.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--inner":
        inner_cli(float(sys.argv[2]), json.loads(sys.argv[3]), "--cprofile" in sys.argv)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--only", choices=("ex1", "batch", "class", "training", "perf"), default=None)
    ap.add_argument("--perf-runs", type=int, default=3, help="runs of each command under perf stat (part 5)")
    ap.add_argument("--train-steps", type=int, default=2000, help="steps of part 4")
    ap.add_argument("--class-n", type=int, default=200, help="class size of part 3")
    ap.add_argument("--class-runs", type=int, default=2)
    args = ap.parse_args()
    print(f"profile_grade: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    if args.only in (None, "ex1"):
        part1(args.runs, args.cprofile)
    if args.only in (None, "batch"):
        part2(args.reps)
    if args.only in (None, "class"):
        part3(args.class_n, args.class_runs)
    if args.only in (None, "training"):
        part4(args.train_steps)
    if args.only in (None, "perf"):
        part5(args.perf_runs, args.class_n)


if __name__ == "__main__":
    main()
