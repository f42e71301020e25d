"""The lecture's training loop with a plain `loss.backward()`: the yardstick of `grade ex4 --full`'s per-step time.

Same data, initialisation, minibatch draws, learning-rate schedule and thread count as `grade ex4 --full`
(grader/training.py), with autograd computing the gradients; the loop alone is timed, as training.sgd times its
own. Prints one JSON object: steps, seconds, the last minibatch loss, and the train and val loss after BatchNorm
calibration (training.finish, as `grade ex4 --full` reports them).

    python bench/plain_loop.py [--steps 10000] [--threads 1] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from grader.training import sgd as training
from grader.truth import corpus, fixture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    words = corpus.load(args.data)
    g = fixture.EX4_PRIMARY
    Xtr, Ytr = training.dataset(words, "train", g.block_size)
    p = fixture.init_params(g)
    C, W1, b1, W2, b2, bngain, bnbias = (p[k] for k in fixture.PARAM_NAMES)
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    for q in parameters:
        q.requires_grad = True
    gen = torch.Generator().manual_seed(training.BATCH_SEED)
    lossi = []
    start = time.perf_counter()
    for i in range(args.steps):
        ix = torch.randint(0, Xtr.shape[0], (g.n,), generator=gen)
        Xb, Yb = Xtr[ix], Ytr[ix]
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmean = hprebn.mean(0, keepdim=True)
        bnvar = hprebn.var(0, keepdim=True, unbiased=True)
        bnvar_inv = (bnvar + 1e-5) ** -0.5
        bnraw = (hprebn - bnmean) * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for q in parameters:
            q.grad = None
        loss.backward()
        lr = training.LR if i < args.steps // 2 else training.LR_LATE
        for q in parameters:
            q.data += -lr * q.grad
        lossi.append(loss.item())
    seconds = time.perf_counter() - start
    params = {k: q.detach() for k, q in zip(fixture.PARAM_NAMES, parameters, strict=True)}
    run = training.finish(params, lossi, None, seconds, words)
    out = {"steps": args.steps, "seconds": seconds, "last_loss": lossi[-1]}
    out.update(train_loss=run.train_loss, val_loss=run.val_loss)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
