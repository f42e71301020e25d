"""Measure a candidate cut for `grade batch`'s similarity: the same comparison, memoised by function text.

grader/reports/similarity.py fingerprints every function of every student and calls copydetect on every pair of
students' same-named functions. Many students write the same text for a function (the one-liners above all), so
this prototype fingerprints each distinct (function, text) once and compares each distinct pair of texts once,
then adds up every pair of students exactly as compare_class does. It must return the identical result; the
script times both on a class from common.build_class and prints the gain. Nothing in grader/ is changed.

    python bench/proto_similarity.py [--n 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EX_FILES, build_class, describe  # noqa: E402

from grader.reports import similarity as sim  # noqa: E402


def compare_class_memo(sources: dict[str, dict[str, str]]) -> sim.Similarity:
    """Return what sim.compare_class returns, fingerprinting and comparing each distinct text only once."""
    students = sorted(sources)
    chunks = {s: {} for s in students}
    for s in students:
        for ex, text in sorted(sources[s].items()):
            chunks[s].update(sim.functions(ex, text))
    stub = sim._stub_hashes()
    by_text: dict[tuple[str, str], object] = {}
    frequency: dict[str, dict[int, int]] = {}
    for s in students:
        for name, code in chunks[s].items():
            fp = by_text.get((name, code))
            if fp is None:
                fp = sim._fingerprint(code)
                sim._drop(fp, stub.get(name, set()))
                by_text[(name, code)] = fp
            counts = frequency.setdefault(name, {})
            for h in fp.hashes:
                counts[h] = counts.get(h, 0) + 1
    common_at = max(sim.COMMON_MIN, math.ceil(sim.COMMON_SHARE * len(students)))
    for (name, _), fp in by_text.items():
        sim._drop(fp, {h for h, c in frequency[name].items() if c >= common_at})
    prints = {s: {name: by_text[(name, code)] for name, code in chunks[s].items()} for s in students}
    memo: dict = {}
    real = sim.compare_files

    def compare_files(x, y):
        key = (id(x), id(y))
        if key not in memo:
            memo[key] = real(x, y)
        return memo[key]

    sim.compare_files = compare_files
    try:
        pairs, compared, top = [], 0, 0.0
        for i, a in enumerate(students):
            for b in students[i + 1 :]:
                compared += 1
                pair = sim._compare(a, b, prints[a], prints[b], chunks)
                top = max(top, pair.score)
                if pair.score >= sim.THRESHOLD and pair.overlap >= sim.MIN_OVERLAP:
                    pairs.append(pair)
    finally:
        sim.compare_files = real
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return sim.Similarity(pairs, compared, round(top, 4), sim.compare_class({}).settings)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        subs = Path(tmp) / "class" / "subs"
        students = build_class(subs, args.n)
        sources = {s.name: {ex: (subs / s.name / f"{ex}.py").read_text() for ex in EX_FILES} for s in students}
    n_funcs = sum(len(sim.functions(ex, t)) for src in sources.values() for ex, t in src.items())
    distinct = {(k, c) for src in sources.values() for ex, t in src.items() for k, c in sim.functions(ex, t).items()}
    print(f"class of {args.n} (common.build_class): {n_funcs} functions, {len(distinct)} distinct texts")
    now, memo = [], []
    for r in range(args.rounds):
        results = {}
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            t = time.perf_counter()
            results[which] = (sim.compare_class if which == 0 else compare_class_memo)(sources).to_dict()
            (now if which == 0 else memo).append(time.perf_counter() - t)
        if results[0] != results[1]:
            raise SystemExit("the memoised similarity differs from compare_class's result")
    print(f"   compare_class today      {describe(now)}")
    print(f"   memoised by function text {describe(memo)}; identical result")
    a, b = statistics.median(now), statistics.median(memo)
    print(f"   gain: {a - b:.2f} s per run ({a / b:.1f}x); pairs listed: {len(results[0]['pairs'])}")


if __name__ == "__main__":
    main()
