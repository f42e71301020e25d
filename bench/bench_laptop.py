"""The laptop path against the Linux one: `grade all` with GRADER_SANDBOX=spawn (a fresh interpreter as the sandbox,
as on macOS and Windows) against the default fork backend, paired and interleaved (issue #20: at most 1.5x).

Each run must exit 0 with "score 42/42" on the reference; the spawn run must also say in one line which walls it
lacks. Prints both medians and the median of the paired per-round ratios.

    python bench/bench_laptop.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REFERENCE, Case, CheckFailed, clean_env, describe, grade_cmd, paired, ratio_line  # noqa: E402


def _full_marks(r) -> None:
    if r.rc != 0 or "score 42/42" not in r.out:
        raise CheckFailed(f"expected exit 0 and score 42/42, got exit {r.rc}")


def _full_marks_one_notice(r) -> None:
    _full_marks(r)
    notices = [line for line in r.err.splitlines() if line.startswith("sandbox")]
    if len(notices) != 1:
        raise CheckFailed(f"expected one line about the sandbox, got {notices}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"bench_laptop: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start")
    cmd = [*grade_cmd(), "all", "--submission", str(REFERENCE)]
    fork = Case("grade all (fork, Linux)", cmd, _full_marks, env=clean_env(GRADER_SANDBOX="fork"))
    spawn = Case("grade all (spawn, laptop)", cmd, _full_marks_one_notice, env=clean_env(GRADER_SANDBOX="spawn"))
    paired([fork, spawn], args.rounds)
    for case in (fork, spawn):
        print(f"   {case.name:28} {describe(case.times)}")
    print("   " + ratio_line("spawn / fork", spawn.times, fork.times, "<= 1.5"))


if __name__ == "__main__":
    main()
