"""What the similarity check costs per student, in-process: reading, fingerprinting, comparing (issue #22).

Loads a class's sources as `grade batch`'s similarity child does (discover, then read_entry per student, as
grader.classroom.reports.class_similarity) and times grader.classroom.reports.similarity.compare_class in CPU time
(time.process_time), split into fingerprint_class and the rest (the comparison). Each timed run is a fresh
interpreter, as the child is: the import of the similarity module, the stub's fingerprints and Pygments' lexer
are paid in every run, as `grade batch` pays them once per class.

Every run's result (Similarity.to_dict()) is checked: identical across rounds, and, with --check, identical to a
result saved by --save (an older checkout's, say: `PYTHONPATH=DIR python bench/similarity_cost.py ...`, DIR a
whole checkout: the stub is read from the exercises/ beside grader/, and a different stub changes the result).

    python bench/similarity_cost.py CLASS/subs [CLASS2/subs ...] [--rounds 3] [--save F.pkl | --check F.pkl]
        [--all-pairs]
    python bench/similarity_cost.py --build-copies DIR [--n 120]

--all-pairs lists every pair with every function (THRESHOLD, MIN_OVERLAP and SHOWN_FUNCTION at 0), so a check
compares every pair's score, overlap, functions and shown lines, not only the flagged ones.
--build-copies writes a class full of near-copies (renamed, reordered, wrapped, moved into helpers, partial
copies, trap snippets) of tests/independent.py students.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(subs: Path, all_pairs: bool, out: Path) -> None:
    """Time one class in this interpreter; write the timings and the result to out (a pickle)."""
    t0 = time.process_time()
    from grader.classroom import deadline
    from grader.classroom.reports import similarity
    from grader.submissions.intake import discover, read_entry

    t_import = time.process_time() - t0
    entries, _ = discover(subs)
    t0 = time.process_time()
    sources = {}
    for e in entries:  # as class_similarity reads them
        with deadline.overall(deadline.SIMILARITY_READ):
            sources[e.student] = {ex: s.text for ex, s in read_entry(e).sources.items()}
    t_read = time.process_time() - t0
    if all_pairs:
        similarity.THRESHOLD, similarity.MIN_OVERLAP, similarity.SHOWN_FUNCTION = 0.0, 0, 0.0
    real = similarity.fingerprint_class
    spent = []

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.process_time() - start)

    similarity.fingerprint_class = timed
    t0 = time.process_time()
    result = similarity.compare_class(sources).to_dict()
    t_total = time.process_time() - t0
    timings = {
        "n": len(sources),
        "import": t_import,
        "read": t_read,
        "fingerprint": spent[0],
        "compare": t_total - spent[0],
        "total": t_total,
    }
    out.write_bytes(pickle.dumps({"timings": timings, "result": result}))


def run_child(subs: Path, all_pairs: bool) -> dict:
    """Run one() in a fresh interpreter; return its timings and result."""
    with tempfile.TemporaryDirectory(prefix="simcost_") as tmp:
        out = Path(tmp) / "out.pkl"
        cmd = [sys.executable, __file__, "--one", str(subs), "--out", str(out)] + (["--all-pairs"] if all_pairs else [])
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode:
            raise SystemExit(f"CHECK FAILED: the run on {subs} ended {proc.returncode}: {proc.stderr[-3000:]}")
        return pickle.loads(out.read_bytes())


def _first_difference(a, b, at="result"):
    """Return where two results first differ (a path into them), or None."""
    if type(a) is not type(b):
        return f"{at}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{at}: keys {sorted(set(a) ^ set(b))[:5]} differ, or their order"
        for k in a:
            found = _first_difference(a[k], b[k], f"{at}[{k!r}]")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{at}: {len(a)} items != {len(b)}"
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{at}[{k}]")
            if found:
                return found
        return None
    return None if a == b else f"{at}: {a!r} != {b!r}"


def build_copies(root: Path, n: int) -> None:
    """Write n students: independent ones, and near-copies of them of every kind the tests know."""
    sys.path.insert(0, str(ROOT))
    from tests.independent import copied_and_renamed, student_files
    from tests.test_similarity_evasion import bodies_wrapped, into_helpers, under_if_true

    sys.path.insert(0, str(ROOT / "bench"))
    from common import traps

    corpus = traps()
    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir(parents=True)
    originals = max(2, n // 3)
    kinds = [
        ("renamed", copied_and_renamed),
        ("iftrue", under_if_true),
        ("wrapped", bodies_wrapped),
        ("helpers", into_helpers),
        ("all", lambda f: bodies_wrapped(into_helpers(copied_and_renamed(f)))),
        ("verbatim", dict),
        ("half", lambda f: {k: (copied_and_renamed(f)[k] if k in ("ex1.py", "ex3.py") else v) for k, v in f.items()}),
    ]
    for i in range(n):
        if i < originals:
            name, files = f"o{i:04d}", student_files(i)
        else:
            j = i - originals
            kind, make = kinds[j % len(kinds)]
            src = (j * 7) % originals
            files = make(student_files(src))
            if kind == "half":  # half copied, the other half another student's
                other = student_files((src + 1) % originals)
                files.update({k: v for k, v in other.items() if k in ("ex2.py", "ex4.py")})
            name = f"c{i:04d}_{kind}_of_o{src:04d}"
            if j % 5 == 0:  # a trap snippet on top of the copy
                t = corpus[j % len(corpus)]
                files[f"{t.exercise}.py"] += "\n\n" + t.path.read_text()
        (root / name).mkdir()
        for f, text in files.items():
            (root / name / f).write_text(text)
    base = student_files(originals + 1)
    odd = {  # students past a bound (left out, with the reason), and files that do not parse
        "x_chars": {"ex2.py": "x = 1\n" * 40_000},
        "x_tokens": {"ex2.py": "def dlogits(logits, Yb, n):\n    return [" + "1, " * 9_000 + "]\n"},
        "x_functions": {"ex2.py": "".join(f"def f{i}():\n    return {i}\n" for i in range(300))},
        "x_deep": {"ex2.py": "def dlogits(logits):\n    return " + "-" * 300 + "logits\n"},
        "x_syntax": {"ex1.py": base["ex1.py"].replace("def ", "def def ", 1)},
        "x_syntax_copy": {"ex1.py": base["ex1.py"].replace("def ", "def def ", 1).replace("    ", "  ")},
        "x_empty": {"ex1.py": "", "ex3.py": "\n\n# nothing\n"},
    }
    for name, changed in odd.items():
        (root / name).mkdir()
        for f, text in {**base, **changed}.items():
            (root / name / f).write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("subs", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--save", type=Path, help="write the results here (a pickle: {subs: to_dict()})")
    ap.add_argument("--check", type=Path, help="results --save wrote: every result must be identical")
    ap.add_argument("--all-pairs", action="store_true")
    ap.add_argument("--build-copies", type=Path)
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one, args.all_pairs, args.out)
        return
    if args.build_copies:
        build_copies(args.build_copies, args.n)
        print(f"wrote {args.n} students to {args.build_copies}")
        return
    print(f"similarity_cost: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, rounds {args.rounds}")
    saved = pickle.loads(args.check.read_bytes()) if args.check else None
    results = {}
    for subs in args.subs:
        runs = [run_child(subs, args.all_pairs) for _ in range(args.rounds)]
        first = runs[0]["result"]
        for r in runs[1:]:
            diff = _first_difference(first, r["result"])
            if diff:
                raise SystemExit(f"CHECK FAILED: {subs}: two rounds differ at {diff}")
        if saved is not None:
            diff = _first_difference(saved[str(subs)], first)
            if diff:
                raise SystemExit(f"CHECK FAILED: {subs}: differs from {args.check} at {diff}")
        results[str(subs)] = first
        n = runs[0]["timings"]["n"]

        def med(key, runs=runs, n=n):
            values = [1000 * r["timings"][key] / n for r in runs]
            spread = f" [{min(values):.2f}-{max(values):.2f}]" if len(runs) > 1 else ""
            return f"{statistics.median(values):.2f}{spread}"

        imported = statistics.median(r["timings"]["import"] for r in runs)
        print(
            f"  {subs} ({n} students, {len(first.get('pairs', []))} pairs listed): ms of CPU per student, median"
            f" of {len(runs)}: fingerprint {med('fingerprint')}, compare {med('compare')}, compare_class"
            f" {med('total')}; reading {med('read')}; import {1000 * imported:.0f} ms once"
        )
        if saved is not None:
            print("    identical to the saved result")
    if args.save:
        args.save.write_bytes(pickle.dumps(results))
        print(f"saved to {args.save}")
    json.dumps(results)  # every result is what summary.json can hold


if __name__ == "__main__":
    main()
