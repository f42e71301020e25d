"""Time `grade ex4 --full` per training step against the lecture's plain `loss.backward()` loop.

Each round runs, in a shuffled order, two whole processes:
- `grade ex4 --full --submission reference --steps S --json`: the reference backward trains the network inside
  the sandbox; its JSON gives the loop's own seconds (training.sgd times the loop alone), and it must exit 0
  with every item passed;
- `python bench/plain_loop.py --steps S`: the lecture's loop with autograd (same data, seed, minibatches,
  learning rates and one thread), its loop timed the same way.
Both must reach the same loss (train and val after BatchNorm calibration, within --tolerance), or no figure is
printed. Prints the per-step times, their paired ratio, and both processes' wall times.

    python bench/bench_training.py [--steps 10000] [--rounds 3] [--tolerance 0.01] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    PYTHON,
    REFERENCE,
    ROOT,
    Case,
    CheckFailed,
    Run,
    compile_bytecode,
    describe,
    grade_cmd,
    paired,
    ratio_line,
)

PLAIN = Path(__file__).resolve().parent / "plain_loop.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.01, help="largest |train or val loss difference|")
    ap.add_argument("--data", default=None, help="names file (default: the census names)")
    args = ap.parse_args()
    data = ["--data", args.data] if args.data else []
    losses: dict[str, list] = {"grade": [], "plain": []}
    per_step: dict[str, list] = {"grade": [], "plain": []}

    def check_grade(r: Run) -> None:
        try:
            result = json.loads(r.out)
        except ValueError:
            raise CheckFailed(f"exit {r.rc}; stdout is not JSON") from None
        bad = [i["id"] for i in result["items"] if i["status"] != "passed"]
        t = result.get("training") or {}
        if r.rc != 0 or bad or t.get("steps") != args.steps or t.get("diverged_at") is not None:
            raise CheckFailed(f"exit {r.rc}, items not passed {bad}, training {t}")
        losses["grade"].append((t["train_loss"], t["val_loss"]))
        per_step["grade"].append(t["seconds"] / args.steps)

    def check_plain(r: Run) -> None:
        if r.rc != 0:
            raise CheckFailed(f"exit {r.rc}")
        d = json.loads(r.out.strip().splitlines()[-1])
        if d["steps"] != args.steps:
            raise CheckFailed(f"ran {d['steps']} steps")
        losses["plain"].append((d["train_loss"], d["val_loss"]))
        per_step["plain"].append(d["seconds"] / args.steps)

    grade = Case(
        "grade ex4 --full (reference)",
        [*grade_cmd(), "ex4", "--full", "--json", "--submission", str(REFERENCE), "--steps", str(args.steps), *data],
        check_grade,
    )
    plain = Case("plain loss.backward() loop", [PYTHON, str(PLAIN), "--steps", str(args.steps), *data], check_plain)
    print(f"bench_training: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; {args.steps} steps")
    print(compile_bytecode(ROOT))
    paired([grade, plain], args.rounds, warmup=0)
    (gt, gv), (pt, pv) = losses["grade"][0], losses["plain"][0]
    worst = max(abs(a - b) for (a, b) in zip(*(sum(losses[k], ()) for k in ("grade", "plain")), strict=True))
    if worst > args.tolerance:
        raise CheckFailed(f"the two loops did not reach the same loss: {losses}")
    if len(set(losses["grade"])) != 1 or len(set(losses["plain"])) != 1:
        raise CheckFailed(f"a loop is not deterministic across rounds: {losses}")
    print(
        f"same loss: grade train {gt:.4f} val {gv:.4f}; plain train {pt:.4f} val {pv:.4f}; largest difference "
        f"{worst:.2e} (tolerance {args.tolerance})"
    )
    print(f"   {grade.name:30s} per step {describe(per_step['grade'], 'ms', 1e3, 4)}")
    print(f"   {plain.name:30s} per step {describe(per_step['plain'], 'ms', 1e3, 4)}")
    label = "per-step time grade ex4 --full / plain loop"
    print("   " + ratio_line(label, per_step["grade"], per_step["plain"], "<= 0.75"))
    print(f"   whole process, grade ex4 --full: {describe(grade.times)}")
    print(f"   whole process, plain loop:       {describe(plain.times)}")


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as exc:
        print(f"CHECK FAILED, no figure of this run counts:\n{exc}", file=sys.stderr)
        sys.exit(1)
