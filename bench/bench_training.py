"""Time one Ex4 SGD step driven by the reference backward against the same step driven by autograd.

Both loops use the same data, forward pass (fixture.ex4_forward), batches and SGD updates; only the gradient
differs: reference/ex4.py's backward() under torch.no_grad(), or loss.backward(). Prints only.

    python bench/bench_training.py [--steps 2000] [--warmup 200] [--rounds 3] [--threads 1] [--data PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import fixture, training  # noqa: E402

REFERENCE = ROOT / "reference" / "ex4.py"


def load_backward(path: Path):
    """Import backward() from a file by path."""
    spec = importlib.util.spec_from_file_location("reference_ex4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.backward


def manual_grads(backward):
    """Return a step function whose gradients come from the hand-written backward."""
    names = None

    def grads(params, Xb, Yb):
        nonlocal names
        with torch.no_grad():
            t = fixture.ex4_forward(params, Xb, Yb)
            available = {**t, **params, "Xb": Xb, "Yb": Yb, "n": Xb.shape[0]}
            if names is None:
                names = list(training.bind(backward, available))
            return t["loss"].item(), backward(**{k: available[k] for k in names})

    return grads


def autograd_grads(params, Xb, Yb):
    """Return the loss and the gradients of every parameter by loss.backward()."""
    for p in params.values():
        p.grad = None
    t = fixture.ex4_forward(params, Xb, Yb)
    t["loss"].backward()
    return t["loss"].item(), {"d" + k: p.grad for k, p in params.items()}


def run(grads_fn, Xtr, Ytr, steps: int, autograd: bool) -> float:
    """Run the lecture's SGD loop for steps and return the seconds per step."""
    params = fixture.init_params(fixture.EX4_PRIMARY)
    if autograd:
        for p in params.values():
            p.requires_grad_()
    gen = torch.Generator().manual_seed(training.BATCH_SEED)
    n = fixture.EX4_PRIMARY.n
    start = time.perf_counter()
    for step in range(steps):
        ix = torch.randint(0, Xtr.shape[0], (n,), generator=gen)  # (32,)
        _, grads = grads_fn(params, Xtr[ix], Ytr[ix])
        lr = training.LR if step < steps // 2 else training.LR_LATE
        with torch.no_grad():
            for k, p in params.items():
                p.add_(grads["d" + k], alpha=-lr)
    return (time.perf_counter() - start) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="alternate the two loops this often; keep the best")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=None, help="names file (default: the census names)")
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    corpus = training.as_corpus(args.data)
    Xtr, Ytr = training.dataset(corpus, "train", fixture.EX4_PRIMARY.block_size)  # (N, 3), (N,)
    manual = manual_grads(load_backward(args.reference))
    run(manual, Xtr, Ytr, args.warmup, autograd=False)
    run(autograd_grads, Xtr, Ytr, args.warmup, autograd=True)
    best_manual = best_auto = float("inf")
    for _ in range(args.rounds):
        best_manual = min(best_manual, run(manual, Xtr, Ytr, args.steps, autograd=False))
        best_auto = min(best_auto, run(autograd_grads, Xtr, Ytr, args.steps, autograd=True))

    print(f"corpus: {corpus.source} ({len(Xtr)} training examples)")
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    print(f"{args.steps} steps x {args.rounds} rounds each after {args.warmup} warm-up steps; best round")
    print(f"reference backward: {best_manual * 1e3:.3f} ms/step ({1 / best_manual:.0f} steps/s)")
    print(f"autograd backward:  {best_auto * 1e3:.3f} ms/step ({1 / best_auto:.0f} steps/s)")
    print(f"ratio reference / autograd: {best_manual / best_auto:.2f}")


if __name__ == "__main__":
    main()
