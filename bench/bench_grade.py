"""Time `grade ex1` as a student runs it, whole processes, against `python -c "import torch"`.

Every round runs each command once, in a shuffled order (paired, interleaved), and every run's exit status and
output are checked against the verdicts its submission must get before its time counts:
- `python -c "import torch"`, the baseline; and `import torch` then `os._exit(0)` (no interpreter teardown);
- `grade ex1 --submission reference`: exit 0, "score 26/26: 26 passed";
- `grade ex1` with one wrong-shape gradient (tests/corpus/ex1/dbnmeani_lecture_no_keepdim.py appended to the
  reference): exit 1, "score 25/26", ex1.dbnmeani FAILED with shape-mismatch;
- `grade ex1` on the stubs: exit 1, "score 0/26: 26 not attempted".
Each `grade ex1` runs twice per round: warm (a warm process started before the rounds, in a folder of the
bench's own, serves it: grader/cli/warm.py, what a student's second and later runs get) and cold (GRADER_WARM=0:
graded in its own process, what a first run gets). The warm process must have served every warm run.
With --all-traps, also every tests/corpus/ex1 case once per round (`grade ex1 --json`, its item's status and traps
checked, cold), as one median over the whole trap mix.

    python bench/bench_grade.py [--rounds 15] [--all-traps] [--traps-rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    EXERCISES,
    PYTHON,
    REFERENCE,
    ROOT,
    Case,
    CheckFailed,
    Run,
    clean_env,
    compile_bytecode,
    describe,
    grade_cmd,
    paired,
    ratio_line,
    run,
    traps,
    write_student,
)

WRONG_SHAPE = "dbnmeani_lecture_no_keepdim"


def no_traceback(r: Run) -> None:
    """Raise unless the process printed no Python traceback."""
    if "Traceback" in r.err or "Traceback" in r.out:
        raise CheckFailed("a traceback was printed")


def expect_silent_success(r: Run) -> None:
    """Check a bare interpreter run: exit 0, nothing printed."""
    if r.rc != 0 or r.out.strip() or r.err.strip():
        raise CheckFailed(f"exit {r.rc}, expected 0 and no output")


def expect_table(rc: int, score_line: str, rows: tuple[tuple[str, ...], ...] = ()):
    """Return a check: the exit status, the score line, and rows of the table that must hold these words."""

    def check(r: Run) -> None:
        no_traceback(r)
        if r.rc != rc:
            raise CheckFailed(f"exit {r.rc}, expected {rc}")
        if score_line not in r.out.splitlines():
            raise CheckFailed(f"no line {score_line!r}")
        lines = r.out.splitlines()
        for words in rows:
            if not any(line.split()[:1] == [words[0]] and all(w in line for w in words) for line in lines):
                raise CheckFailed(f"no table row with {words}")

    return check


def expect_json_item(item: str, status: str, want: tuple[str, ...]):
    """Return a check of `grade --json`: the item's status and traps, every other item passed."""

    def check(r: Run) -> None:
        no_traceback(r)
        try:
            result = json.loads(r.out)
        except ValueError:
            raise CheckFailed("stdout is not JSON") from None
        items = {i["id"]: i for i in result["items"]}
        got = items[item]
        if (got["status"], tuple(sorted(got["traps"]))) != (status, want):
            raise CheckFailed(f"{item}: {got['status']} {got['traps']}, expected {status} {want}")
        others = [k for k, i in items.items() if k != item and i["status"] != "passed"]
        if others or r.rc != (0 if status == "passed" else 1):
            raise CheckFailed(f"exit {r.rc}; other items not passed: {others}")

    return check


def _start_warm(cmd: list[str], env: dict, limit: float = 120.0) -> float:
    """Run cmd once (graded cold, it starts a warm process as it ends); return seconds until one serves."""
    t = time.perf_counter()
    run(cmd, env=env)
    while _served(env) < 0:
        if time.perf_counter() - t > limit:
            raise SystemExit(f"no warm process after {limit:.0f} s")
        time.sleep(0.2)
    return time.perf_counter() - t


def _served(env: dict) -> int:
    """Return the runs the warm process in env's folder has served (`grade warm`), or -1 if there is none."""
    r = run([*grade_cmd(), "warm"], env=env)
    got = re.search(r"up [\d.]+ s, (\d+) run\(s\) served", r.err)
    return int(got.group(1)) if got else -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="paired rounds (each runs every command once)")
    ap.add_argument("--all-traps", action="store_true", help="also time every tests/corpus/ex1 case")
    ap.add_argument("--traps-rounds", type=int, default=1, help="rounds of the trap mix")
    ap.add_argument(
        "--before",
        type=Path,
        action="append",
        default=[],
        help="an unpacked older checkout (git archive REV | tar -x -C DIR) whose `python -m grader` is timed too",
    )
    args = ap.parse_args()
    grade = grade_cmd()
    print(f"bench_grade: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; python {PYTHON}")
    print(compile_bytecode(ROOT, *args.before))
    print(f"grade: {' '.join(grade)}; wall time of whole processes, spawn to reap; every run's output checked")
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        wrong = next(t for t in traps() if t.exercise == "ex1" and t.path.stem == WRONG_SHAPE)
        assert wrong.traps == ("shape-mismatch",) and wrong.status == "failed"
        sub_wrong = write_student(Path(tmp) / "wrong_shape", "ex1", wrong.path.read_text())
        torch_only = Case("python -c 'import torch'", [PYTHON, "-c", "import torch"], expect_silent_success)
        no_teardown = Case(
            "import torch; os._exit(0)", [PYTHON, "-c", "import os, torch; os._exit(0)"], expect_silent_success
        )
        warm_dir = Path(tmp) / "warm"
        warm_dir.mkdir(mode=0o700)
        warm_env = clean_env(GRADER_WARM="1", TMPDIR=str(warm_dir))
        cold_env = clean_env(TMPDIR=str(warm_dir))
        check_ref = expect_table(0, "score 26/26: 26 passed")
        check_bad = expect_table(1, "score 25/26: 25 passed, 1 failed", (("ex1.dbnmeani", "FAILED", "shape-mismatch"),))
        ref_cmd = [*grade, "ex1", "--submission", str(REFERENCE)]
        bad_cmd = [*grade, "ex1", "--submission", str(sub_wrong)]
        ref = Case("grade ex1 --submission reference (warm)", ref_cmd, check_ref, env=warm_env)
        bad = Case("grade ex1, one wrong-shape gradient (warm)", bad_cmd, check_bad, env=warm_env)
        ref_cold = Case("grade ex1 --submission reference (cold)", ref_cmd, check_ref, env=cold_env)
        bad_cold = Case("grade ex1, one wrong-shape gradient (cold)", bad_cmd, check_bad, env=cold_env)
        stubs = Case(
            "grade ex1 on the stubs (cold)",
            [*grade, "ex1", "--submission", str(EXERCISES)],
            expect_table(1, "score 0/26: 26 not attempted"),
            env=cold_env,
        )
        cases = [torch_only, no_teardown, ref, bad, ref_cold, bad_cold, stubs]
        started = _start_warm(ref_cmd, warm_env)
        print(f"warm process started in {started:.1f} s (its first run graded cold, then torch imported behind it)")
        older = []
        for d in args.before:
            env = clean_env(PYTHONPATH=str(d))
            old = [PYTHON, "-m", "grader", "ex1", "--submission"]
            older.append(
                (
                    d,
                    Case(f"[{d.name}] grade ex1 reference", [*old, str(REFERENCE)], ref.check, cwd=d, env=env),
                    Case(f"[{d.name}] grade ex1 wrong shape", [*old, str(sub_wrong)], bad.check, cwd=d, env=env),
                )
            )
            cases += older[-1][1:]
        print(f"\n== 1. {args.rounds} paired rounds of {len(cases)} commands, shuffled order per round ==")
        try:
            paired(cases, args.rounds)
            served = _served(warm_env)
        finally:
            run([*grade, "warm", "--stop"], env=warm_env)
        want = (args.rounds + 1) * 2  # the warm-up round's runs too
        if served < want:
            raise SystemExit(f"the warm process served {served} runs of the {want} warm ones: some graded cold")
        for c in cases:
            print(f"   {c.name:44s} {describe(c.times)}")
        print(f"   the warm process served all {want} warm runs (warm-up round included)")
        base = torch_only.times
        print()
        print("   " + ratio_line("grade ex1 --submission reference (warm) / import torch", ref.times, base, "<= 0.80"))
        print("   " + ratio_line("grade ex1 wrong shape (warm) / import torch", bad.times, base, "<= 0.85"))
        print("   " + ratio_line("grade ex1 --submission reference (cold) / import torch", ref_cold.times, base))
        print("   " + ratio_line("grade ex1 wrong shape (cold) / import torch", bad_cold.times, base))
        print("   " + ratio_line("grade ex1 on the stubs (cold) / import torch", stubs.times, base))
        print("   " + ratio_line("import torch + os._exit(0) / import torch", no_teardown.times, base))
        for d, old_ref, old_bad in older:
            print(f"   older checkout {d} (`python -m grader`, same rounds):")
            print("      " + ratio_line("grade ex1 --submission reference / import torch", old_ref.times, base))
            print("      " + ratio_line("grade ex1 one wrong-shape gradient / import torch", old_bad.times, base))
        diffs = [a - b for a, b in zip(torch_only.times, no_teardown.times, strict=True)]
        print(f"   interpreter teardown after import torch (paired difference): {describe(diffs, 'ms', 1e3, 1)}")
        above = [g - f for g, f in zip(ref_cold.times, no_teardown.times, strict=True)]
        budget = [0.80 * b - f for b, f in zip(base, no_teardown.times, strict=True)]
        print(f"   grade ex1 reference (cold) above its floor (paired difference): {describe(above, 'ms', 1e3, 1)}")
        print(f"   what 0.80 leaves above that floor (0.80 x import torch - floor): {describe(budget, 'ms', 1e3, 1)}")

        if args.all_traps:
            mix = [t for t in traps() if t.exercise == "ex1"]
            mix_cases = []
            for t in mix:
                folder = write_student(Path(tmp) / t.name, "ex1", t.path.read_text())
                mix_cases.append(
                    Case(t.name, [*grade, "ex1", "--json", "--submission", str(folder)], expect_json_item(*_exp(t)))
                )
            base2 = Case("python -c 'import torch'", [PYTHON, "-c", "import torch"], expect_silent_success)
            print(
                f"\n== 2. the trap mix: all {len(mix)} tests/corpus/ex1 cases (`grade ex1 --json`, item status and "
                f"traps checked), {args.traps_rounds} round(s), with `import torch` runs interleaved =="
            )
            # one import-torch run after every 8 cases, so the baseline sees the same drift
            for _ in range(args.traps_rounds):
                for k, c in enumerate(mix_cases):
                    c.times.append(c.once().seconds)
                    if k % 8 == 0:
                        base2.times.append(base2.once().seconds)
            all_times = [x for c in mix_cases for x in c.times]
            failing = [x for c, t in zip(mix_cases, mix, strict=True) if t.status != "passed" for x in c.times]
            print(f"   every ex1 trap case      {describe(all_times)}")
            print(f"   of which failing ones    {describe(failing)}")
            print(f"   import torch (interleaved) {describe(base2.times)}")
            m = statistics.median(base2.times)
            print(f"   median trap case / median import torch: {statistics.median(all_times) / m:.3f}")
            slow = sorted(((statistics.median(c.times), c.name) for c in mix_cases), reverse=True)[:5]
            print("   slowest cases: " + ", ".join(f"{n} {s:.3f} s" for s, n in slow))


def _exp(t) -> tuple:
    return t.item, t.status, t.traps


if __name__ == "__main__":
    main()
