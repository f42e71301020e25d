"""Throughput of `grade batch` against grading one submission at a time, and the sandbox's per-submission cost.

1. Builds N submissions in a temp dir (copies of reference/, reference/ with an ex1 corpus snippet appended to
   ex1.py, and stubs; all four exercise files in each) and times grade_batch(jobs=J, progress=False).
2. Times `grade all --submission X` as a subprocess on a sample of those submissions, takes the median and
   extrapolates it to N submissions graded one after another.
3. Times runner.grade (sandboxed) on one submission against grading the same functions in this process (exec the
   files into namespaces, bind by name from fixture.inputs() + truth, call on both geometries, torch.allclose).

Prints only; nothing is asserted. Timings are noisy: every figure says whether it is a median or a best-of.

    python bench/bench_batch.py [--n 200] [--jobs 2] [--sample 8] [--reps 20] [--batch-rounds 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from grader import catalogue, fixture, runner  # noqa: E402
from grader.batch import grade_batch  # noqa: E402
from tests.conftest import CORPUS, EXERCISES, make_submission, with_snippet  # noqa: E402

KINDS = ("reference", "snippet", "reference", "snippet", "stubs")  # i % 5: 40% / 40% / 20%


def build_submissions(root: Path, n: int) -> list[tuple[str, Path]]:
    """Write n student folders under root; return (kind, path) for each."""
    snippets = sorted((CORPUS / "ex1").glob("*.py"))
    made, k_snip = [], 0
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        folder = root / f"s{i:04d}"
        if kind == "reference":
            make_submission(folder)
        elif kind == "stubs":
            make_submission(folder, base=EXERCISES)
        else:
            snip = snippets[k_snip % len(snippets)]
            k_snip += 1
            with_snippet(folder, "ex1", snip.read_text())
            kind = f"snippet:{snip.stem}"
        made.append((kind, folder))
    return made


def run_batch(subs: Path, out_root: Path, n: int, jobs: int, rounds: int) -> float:
    print(
        f"== 1. grade_batch(jobs={jobs}, progress=False) on {n} submissions, "
        f"{rounds} round(s){' (best-of reported)' if rounds > 1 else ''} =="
    )
    times = []
    for r in range(rounds):
        out = out_root / f"out{r}"
        t = time.perf_counter()
        summary = grade_batch(subs, out, jobs=jobs, progress=False)
        times.append(time.perf_counter() - t)
    best = min(times)
    print(
        f"   wall time: {best:.2f} s"
        + (f"  (all rounds: {', '.join(f'{x:.2f}' for x in times)})" if rounds > 1 else "")
    )
    print(f"   throughput: {n / best:.1f} submissions/s   (target >= 30/s)")
    print(
        f"   summary: {summary['students']} students, score mean {summary['score']['mean']}, "
        f"errored {len(summary['errored'])}, timed out {len(summary['timed_out'])}"
    )
    print()
    return best


def run_sequential(made, sample: int, n: int, batch_time: float) -> None:
    grade = shutil.which("grade") or "grade"
    sample = max(1, min(sample, len(made)))
    idx = sorted({round(k * (len(made) - 1) / max(1, sample - 1)) for k in range(sample)})
    picked = [made[i] for i in idx]  # evenly spread, so the sample mixes reference / snippet / stubs
    print(
        f"== 2. sequential: `grade all --submission X` as a subprocess, one at a time, on a sample of "
        f"{len(picked)} of the {n} submissions (evenly spread) =="
    )
    times = []
    for kind, path in picked:
        t = time.perf_counter()
        subprocess.run(
            [grade, "all", "--submission", str(path)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        times.append(time.perf_counter() - t)
        print(f"   {path.name} {kind:40s} {times[-1]:.3f} s")
    med = statistics.median(times)
    seq = n * med
    print(f"   median per submission {med:.3f} s (min {min(times):.3f}, max {max(times):.3f})")
    print(
        f"   EXTRAPOLATED sequential time for {n} = {n} x {med:.3f} = {seq:.1f} s "
        f"(not measured: {len(picked)} sampled runs x {n}/{len(picked)})"
    )
    print(
        f"   ratio batch / sequential = {batch_time:.2f} / {seq:.1f} = {100 * batch_time / seq:.2f}%   (target <= 5%)"
    )
    print()


# ---------------------------------------------------------------------------------------------------------------
# in-process grading of the same functions, no sandbox


def exec_file(path: Path) -> dict:
    namespace = {"__name__": f"inproc_{path.stem}", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def bind(fn, call: catalogue.Call, inputs: dict, truth: dict) -> dict:
    """Bind arguments by parameter name, as the runner does: forward values, parameters, batch, earlier grads."""
    args = {}
    for name, p in inspect.signature(fn).parameters.items():
        if name in inputs:
            v = inputs[name]
        elif name in call.grads:
            v = truth[name]
        elif p.default is not p.empty:
            continue
        else:
            raise TypeError(f"{call.function} asks for {name}")
        args[name] = v.clone() if isinstance(v, torch.Tensor) else v  # the runner's child clones too
    return args


def close(value, truth, atol) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.shape == truth.shape
        and value.dtype == truth.dtype
        and torch.allclose(value, truth, atol=atol)
    )


def grade_in_process(folder: Path, exercises=catalogue.EXERCISES) -> tuple[int, int]:
    """Grade every item of a folder in this process; return (passed, items). Same calls as runner.grade."""
    passed = total = 0
    files = {ex: folder / f"{ex}.py" for ex in exercises}
    with torch.no_grad():
        for ex in exercises:
            ns = exec_file(files[ex])
            for call in catalogue.select((ex,)):
                fn = ns[call.function]
                fx_a, fx_b = (catalogue.build_fixture(call, g, None) for g in catalogue.geometries(call))
                atol = 1e-5 if call.ex4 else 1e-8
                if call.kind == "training":
                    ns = exec_file(files[ex])  # the runner re-executes ex4.py before the training steps
                    fn = ns[call.function]
                    ok = True
                    for inputs, truth in fx_a.steps:
                        out = fn(**bind(fn, call, inputs, truth))
                        ok &= all(close(out.get(g), truth[g], atol) for g in fixture.EX4_GRADS)
                    passed += ok
                    total += 1
                    continue
                out_a = fn(**bind(fn, call, fx_a.inputs(), fx_a.truth))
                if call.ex4:
                    ns = exec_file(files[ex])  # geometry B starts from a freshly executed file
                    fn = ns[call.function]
                out_b = fn(**bind(fn, call, fx_b.inputs(), fx_b.truth))
                for item in call.items:
                    key = "d" + item.var
                    va = out_a[key] if call.kind == "dict" else out_a
                    vb = out_b[key] if call.kind == "dict" else out_b
                    passed += close(va, fx_a.truth[key], atol) and close(vb, fx_b.truth[key], atol)
                    total += 1
    return passed, total


def run_overhead(folder: Path, reps: int) -> None:
    print(
        f"== 3. one submission ({folder.name}, all four exercises): sandboxed runner.grade vs in-process, "
        f"median of {reps} after 3 warm-ups =="
    )
    torch.set_num_threads(1)  # as runner.grade does; both sides run in this process with one thread
    for call in catalogue.select(catalogue.EXERCISES):
        for g in catalogue.geometries(call):
            catalogue.build_fixture(call, g, None)
    for _ in range(3):
        r = runner.grade(folder)
        ip = grade_in_process(folder)
    sandboxed, inproc = [], []
    for _ in range(reps):  # interleaved, so drift hits both alike
        t = time.perf_counter()
        r = runner.grade(folder)
        sandboxed.append(time.perf_counter() - t)
        t = time.perf_counter()
        ip = grade_in_process(folder)
        inproc.append(time.perf_counter() - t)
    s, i = statistics.median(sandboxed), statistics.median(inproc)
    n_pass = sum(x.status == "passed" for x in r.items)
    print(
        f"   sandboxed runner.grade            {s * 1e3:7.2f} ms   (min {min(sandboxed) * 1e3:.2f}; "
        f"{n_pass}/{len(r.items)} items passed)"
    )
    print(
        f"   in-process exec + call + allclose {i * 1e3:7.2f} ms   (min {min(inproc) * 1e3:.2f}; "
        f"{ip[0]}/{ip[1]} items passed)"
    )
    print(f"   sandbox overhead per submission: {(s - i) * 1e3:.2f} ms  ({s / i:.1f}x)")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="submissions in the batch")
    ap.add_argument("--jobs", type=int, default=2, help="grade_batch workers")
    ap.add_argument("--batch-rounds", type=int, default=1, help="repeat the batch, report the best")
    ap.add_argument("--sample", type=int, default=8, help="submissions graded one at a time by `grade all`")
    ap.add_argument("--reps", type=int, default=20, help="repetitions for the sandbox-overhead medians")
    ap.add_argument("--keep", type=Path, default=None, help="build the submissions here and keep them")
    args = ap.parse_args()
    print(
        f"bench_batch: {os.cpu_count()} CPUs, torch {torch.__version__}; timings are noisy, every figure says "
        "how it was aggregated"
    )
    tmp = tempfile.mkdtemp(prefix="bench-batch-") if args.keep is None else str(args.keep)
    try:
        subs = Path(tmp) / "subs"
        subs.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        made = build_submissions(subs, args.n)
        kinds = [k.split(":")[0] for k, _ in made]
        print(
            f"built {args.n} submissions in {time.perf_counter() - t:.2f} s: "
            + ", ".join(f"{kinds.count(k)} {k}" for k in ("reference", "snippet", "stubs"))
            + f" (snippets cycle through {len(list((CORPUS / 'ex1').glob('*.py')))} tests/corpus/ex1 files)"
        )
        print()
        batch_time = run_batch(subs, Path(tmp), args.n, args.jobs, args.batch_rounds)
        run_sequential(made, args.sample, args.n, batch_time)
        run_overhead(made[0][1], args.reps)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
