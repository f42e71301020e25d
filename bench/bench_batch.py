"""Time `grade batch` end to end from the shell on a class of full submissions, against the usual autograder.

1. Builds a class of N full submissions (all four files each, every student in a style of their own, see
   common.build_class): half correct, half with one tests/corpus trap snippet (cycling through all of them).
2. Times `grade batch SUBS --out OUT --jobs 2 --timeout 3` as a whole process, R rounds. Every run must exit 0,
   give every student the verdicts their case pins (common.check_student), and write the same gradebook.csv,
   summary.json and students/*.json, byte for byte, as the first run. With --before DIR (an unpacked older
   checkout, e.g. `git archive 1a600a0 | tar -x -C DIR`), that version's `grade batch` runs in the same rounds,
   interleaved, and is checked the same way.
3. The peer: the same N graded the usual way, one pytest run per submission (bench/peer/autograder.py: the
   lecture's forward rebuilt with autograd, the lecture's cmp()), --peer-jobs at a time, each run's failures
   checked against the case. It runs between the batch rounds, so the ratio compares neighbours in time.
4. With --hostile, a stormy class: the same N plus every tests/hostile case (each a full submission too), graded
   by `grade batch` only (hostile code is never run outside the sandbox), checked the same way.
5. The sandbox's cost per submission (bench/sandbox_cost.py): sandboxed runner.grade against the same grading
   in-process, on a sample of the class; for --before too.
--golden DIR saves the first run's outputs there, or, when DIR holds a saved run, compares against it (the
outputs before and after an optimisation must be identical).

    python bench/bench_batch.py [--n 200] [--rounds 3] [--before /tmp/before] [--peer-jobs 2] [--hostile]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PYTHON,
    ROOT,
    Case,
    CheckFailed,
    Run,
    Student,
    build_class,
    check_outdir,
    clean_env,
    compile_bytecode,
    describe,
    grade_cmd,
    paired,
    ratio_line,
    traps,
)

PEER = Path(__file__).resolve().parent / "peer"
PEER_BLIND = {"shape-mismatch", "hardcoded-size", "mutates-input", "uses-autograd", "stale-state"}
_PEER_FAILED = re.compile(r"^FAILED \S+::(test_\w+)(?:\[(\w+)\])?", re.M)
_PEER_COUNTS = re.compile(r"^(?:(\d+) failed, )?(\d+) passed(?:, \d+ warnings?)? in ", re.M)  # a sparse dC warns


# ---------------------------------------------------------------------------------------------------------------
# grade batch, checked


def batch_case(name, cmd, env, cwd, out: Path, students, reference: dict, strict: bool = True) -> Case:
    """Return a timed `grade batch` whose every run is checked: exit 0, each student's verdicts, same bytes."""

    def prepare():
        shutil.rmtree(out, ignore_errors=True)

    def check(r: Run) -> None:
        if r.rc != 0 or "Traceback" in r.err:
            raise CheckFailed(f"exit {r.rc}")
        if not strict:
            rows = (out / "gradebook.csv").read_text().splitlines()
            if len(rows) != len(students) + 1:
                raise CheckFailed(f"gradebook.csv has {len(rows) - 1} rows for {len(students)} students")
            files = {"gradebook.csv": (out / "gradebook.csv").read_bytes()}
        else:
            files = check_outdir(out, students)
        if not reference:
            reference.update(files)
        elif files != reference:
            changed = sorted(k for k in reference if files.get(k) != reference[k])
            raise CheckFailed(f"outputs differ from the first run's: {changed[:5]}\n{_diff(reference, files, changed)}")

    return Case(name, cmd, check, cwd=cwd, env=env, prepare=prepare)


def _diff(a: dict, b: dict, names: list) -> str:
    """Return the first lines of a diff of the first differing file."""
    import difflib

    if not names:
        return ""
    x, y = (d.get(names[0], b"").decode(errors="replace").splitlines() for d in (a, b))
    return "\n".join(list(difflib.unified_diff(x, y, names[0], names[0], lineterm="", n=1))[:40])


def old_checks(out: Path, students: list[Student]) -> str:
    """Say how far the older version's per-student JSON meets today's expectations (it predates some traps)."""
    ok = 0
    from common import check_student

    misses = []
    for s in students:
        try:
            check_student(s, json.loads((out / "students" / f"{s.name}.json").read_text()))
            ok += 1
        except CheckFailed as exc:
            misses.append(str(exc).split(":")[0])
    return f"{ok}/{len(students)} students meet today's expected verdicts" + (
        f" (not: {', '.join(misses[:6])}{' ...' if len(misses) > 6 else ''})" if misses else ""
    )


# ---------------------------------------------------------------------------------------------------------------
# the peer: a pytest run per submission


def peer_item(test: str, param: str | None) -> str:
    """Return the grader's item id of a peer test id."""
    if test == "test_ex1":
        return f"ex1.{param}"
    if test == "test_ex4":
        return f"ex4.d{param}"
    return {"test_ex2": "ex2.dlogits", "test_ex3": "ex3.dhprebn", "test_ex4_training": "ex4.training"}[test]


def check_peer(s: Student, r: Run) -> None:
    """Raise CheckFailed unless a peer run judged its 36 items and failed what its case makes it fail."""
    m = _PEER_COUNTS.search(r.out)
    if not m or r.rc not in (0, 1):
        raise CheckFailed(f"{s.name}: the peer's pytest did not finish (exit {r.rc})\n{r.out[-800:]}{r.err[-800:]}")
    failed_n, passed_n = int(m.group(1) or 0), int(m.group(2))
    failed = {peer_item(t, p) for t, p in _PEER_FAILED.findall(r.out)}
    if failed_n + passed_n != 36 or len(failed) != failed_n:
        raise CheckFailed(f"{s.name}: the peer judged {failed_n + passed_n} items, {len(failed)} named failures")
    if s.kind == "correct":
        if failed:
            raise CheckFailed(f"{s.name}: a correct submission failed the peer's {sorted(failed)}")
        return
    t = s.trap
    allowed = {t.item}
    if t.exercise == "ex4":  # an ex4 snippet replaces the whole backward
        allowed |= {f"ex4.d{p}" for p in "C W1 b1 W2 b2 bngain bnbias".split()} | {"ex4.training"}
    if not failed <= allowed:
        raise CheckFailed(f"{s.name}: the peer failed {sorted(failed - allowed)}, outside {t.item}")
    if t.status == "failed" and not (set(t.traps) & PEER_BLIND) and t.item not in failed:
        raise CheckFailed(f"{s.name}: the peer passed {t.item}, which is wrong in values ({t.traps})")


def run_peer(students: list[Student], subs: Path, jobs: int) -> float:
    """Grade every student with the peer, `jobs` pytest processes at a time; return the wall time of all."""
    cmd = [PYTHON, "-m", "pytest", "-c", str(PEER / "pytest.ini"), str(PEER / "autograder.py"), "-rf"]
    todo = list(students)
    running: dict = {}
    start = time.perf_counter()
    while todo or running:
        while todo and len(running) < jobs:
            s = todo.pop(0)
            env = clean_env(PEER_SUBMISSION=str(subs / s.name))
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running[p] = (s, time.perf_counter())
        done = None
        while done is None:
            for p in running:
                if p.poll() is not None:
                    done = p
                    break
            else:
                time.sleep(0.002)
        out, err = done.communicate()
        s, t0 = running.pop(done)
        check_peer(s, Run(time.perf_counter() - t0, done.returncode, out, err))
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------------------------------


def sandbox_cost(subs: Path, sample: int, rounds: int, before: list[Path]) -> None:
    """Run bench/sandbox_cost.py for this checkout (and the older one) and print its figures."""
    script = Path(__file__).resolve().parent / "sandbox_cost.py"
    args = ["--subs", str(subs), "--sample", str(sample), "--rounds", str(rounds), "--json"]
    versions = [("this checkout", clean_env(), ROOT)]
    for d in before:
        versions.append((f"[{d.name}] ({d})", clean_env(PYTHONPATH=str(d)), d))
    for label, env, cwd in versions:
        p = subprocess.run([PYTHON, str(script), *args], env=env, cwd=cwd, capture_output=True, text=True)
        if p.returncode != 0:
            raise CheckFailed(f"sandbox_cost.py ({label}) failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        d = json.loads(p.stdout.strip().splitlines()[-1])
        ms = 1e-3
        print(f"   {label}: grader {d['grader']}, {d['sample']} submissions x {d['rounds']} rounds, verdicts identical")
        print(f"      sandboxed runner.grade      {describe([x * ms for x in d['sandboxed_ms']], 'ms', 1e3, 1)}")
        print(f"      in-process, same judging    {describe([x * ms for x in d['inproc_ms']], 'ms', 1e3, 1)}")
        print(f"      sandbox cost per submission {describe([x * ms for x in d['diff_ms']], 'ms', 1e3, 1)} (paired)")


def golden(files: dict, where: Path | None) -> None:
    """Save a run's outputs to where, or compare them with the run saved there."""
    if where is None:
        return
    saved = sorted(p for p in where.rglob("*") if p.is_file()) if where.is_dir() else []
    if not saved:
        for name, data in files.items():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            (where / name).write_bytes(data)
        print(f"   golden: saved {len(files)} files to {where}")
        return
    old = {str(p.relative_to(where)): p.read_bytes() for p in saved}
    diff = sorted(k for k in set(old) | set(files) if old.get(k) != files.get(k))
    if diff:
        raise CheckFailed(f"outputs differ from the golden run in {where}: {diff[:10]} ({len(diff)} files)")
    print(f"   golden: all {len(files)} files identical to the run saved in {where}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="submissions in the class")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", default="3")
    ap.add_argument("--rounds", type=int, default=3, help="timed `grade batch` runs (per version)")
    ap.add_argument("--warmup", type=int, default=1, help="checked but untimed runs of each version first")
    ap.add_argument(
        "--before", type=Path, action="append", default=[], help="an unpacked older checkout to time alongside"
    )
    ap.add_argument(
        "--peer-jobs", default="2", help="peer pytest processes at a time; a list (2,1) runs the peer once per entry"
    )
    ap.add_argument("--hostile", action="store_true", help="also time a class with every tests/hostile case")
    ap.add_argument("--hostile-rounds", type=int, default=1)
    ap.add_argument("--sandbox-sample", type=int, default=24, help="submissions in the sandbox-cost sample (0: skip)")
    ap.add_argument("--sandbox-rounds", type=int, default=5)
    ap.add_argument("--golden", type=Path, default=None, help="save, or compare with, a run's outputs")
    ap.add_argument(
        "--no-similarity-too",
        action="store_true",
        help="also time `grade batch --no-similarity` in the same rounds (how much of the wall is similarity)",
    )
    ap.add_argument("--keep", type=Path, default=None, help="build the class here and keep it")
    args = ap.parse_args()
    print(f"bench_batch: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; python {PYTHON}")
    print(compile_bytecode(ROOT, *args.before))
    tmp = Path(tempfile.mkdtemp(prefix="bench-batch-") if args.keep is None else args.keep)
    try:
        _main(args, tmp)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def _main(args, tmp: Path) -> None:
    subs = tmp / "class" / "subs"
    students = build_class(subs, args.n)
    trapped = [s.trap for s in students if s.kind == "trap"]
    ids = {t for tr in trapped for t in tr.traps}
    n_cases = len(traps())
    print(
        f"class: {args.n} full submissions, {sum(s.kind == 'correct' for s in students)} correct, {len(trapped)} "
        f"with a trap snippet ({len({t.path for t in trapped})} of the {n_cases} tests/corpus cases, {len(ids)} "
        f"trap ids); every student written in a style of their own"
    )
    flags = ["--jobs", str(args.jobs), "--timeout", args.timeout]
    after_ref: dict = {}
    cases = [
        batch_case(
            f"grade batch ({args.n})",
            [*grade_cmd(), "batch", str(subs), "--out", str(tmp / "out_after"), *flags],
            clean_env(),
            ROOT,
            tmp / "out_after",
            students,
            after_ref,
        )
    ]
    if args.no_similarity_too:
        cases.append(
            batch_case(
                f"grade batch ({args.n}) --no-similarity",
                [*grade_cmd(), "batch", str(subs), "--out", str(tmp / "out_nosim"), *flags, "--no-similarity"],
                clean_env(),
                ROOT,
                tmp / "out_nosim",
                students,
                {},
            )
        )
    for d in args.before:
        cases.append(
            batch_case(
                f"grade batch ({args.n}), [{d.name}]",
                [PYTHON, "-m", "grader", "batch", str(subs), "--out", str(tmp / f"out_{d.name}"), *flags],
                clean_env(PYTHONPATH=str(d)),
                d,
                tmp / f"out_{d.name}",
                students,
                {},
                strict=False,
            )
        )
    others = ", interleaved with the other variants" if len(cases) > 1 else ""
    print(
        f"\n== 1. `grade batch SUBS --out OUT {' '.join(flags)}`, whole processes from the shell, {args.warmup} "
        f"untimed warm-up and {args.rounds} timed round(s){others}; every run checked =="
    )
    peer_jobs = [int(x) for x in args.peer_jobs.split(",") if int(x) > 0]
    first = args.rounds // 2 if peer_jobs else args.rounds
    paired(cases, first, warmup=args.warmup)
    peer_walls = {j: run_peer(students, subs, j) for j in peer_jobs}
    paired(cases, args.rounds - first, warmup=0)
    after = cases[0]
    for c in cases:
        rate = [args.n / x for x in c.times]
        print(f"   {c.name:32s} {describe(c.times)}; {describe(rate, 'subs/s', 1, 1)}")
    rate = args.n / statistics.median(after.times)
    print(f"   throughput `grade batch` of {args.n}: {rate:.1f} subs/s (N / median wall; target >= 40)")
    if args.no_similarity_too:
        nosim = cases[1]
        rate = args.n / statistics.median(nosim.times)
        print(f"   throughput `grade batch --no-similarity` of {args.n}: {rate:.1f} subs/s")
        print("   " + ratio_line("wall --no-similarity / wall with similarity", nosim.times, after.times))
    for d, c in zip(args.before, cases[1 + args.no_similarity_too :], strict=True):
        print(f"   [{d.name}]: {old_checks(tmp / f'out_{d.name}', students)}")
        print("   " + ratio_line(f"wall [{d.name}] / wall this checkout", c.times, after.times))
    golden(after_ref, args.golden)

    if peer_walls:
        print(
            f"\n== 2. the peer: one pytest run per submission (bench/peer/autograder.py), all {args.n}, each run's "
            f"failures checked; run between the batch rounds above =="
        )
        med = statistics.median(after.times)
        for jobs, wall in peer_walls.items():
            print(
                f"   peer, {jobs} pytest at a time: {wall:.1f} s wall ({args.n / wall:.2f} subs/s); peer / grade batch "
                f"= {wall / med:.1f}x slower (peer wall / batch median; {wall / max(after.times):.1f}-"
                f"{wall / min(after.times):.1f}x over the batch range)   target: keep >= 50x"
            )

    if args.hostile:
        stormy = tmp / "stormy" / "subs"
        stormy_students = build_class(stormy, args.n, hostile=True)
        n_h = len(stormy_students) - args.n
        print(
            f"\n== 3. the stormy class: the same {args.n} plus {n_h} tests/hostile cases (full submissions), "
            f"{args.hostile_rounds} round(s), every run checked =="
        )
        sc = batch_case(
            f"grade batch ({args.n} + {n_h} hostile)",
            [*grade_cmd(), "batch", str(stormy), "--out", str(tmp / "out_stormy"), *flags],
            clean_env(),
            ROOT,
            tmp / "out_stormy",
            stormy_students,
            {},
        )
        paired([sc], args.hostile_rounds, warmup=0)
        total = len(stormy_students)
        print(f"   {sc.name:32s} {describe(sc.times)}; {total / statistics.median(sc.times):.1f} subs/s")

    if args.sandbox_sample:
        print(
            f"\n== 4. the sandbox's cost per submission: sandboxed runner.grade vs the same grading in-process "
            f"(bench/sandbox_cost.py), warm process, {args.sandbox_sample} of the class x {args.sandbox_rounds} =="
        )
        sandbox_cost(subs, args.sandbox_sample, args.sandbox_rounds, args.before)


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as exc:
        print(f"CHECK FAILED, no figure of this run counts:\n{exc}", file=sys.stderr)
        sys.exit(1)
