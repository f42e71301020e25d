"""The usual autograder, as the peer of `grade batch`: one pytest run per submission, the lecture's cmp().

It rebuilds the lecture's forward pass with autograd on the grader's fixture data (the same seeded parameters
and batch), imports the student's four files, calls each function with the inputs it names, and compares with
the lecture's cmp(). No sandbox, no hidden geometry, no trap diagnosis: the cheap way a course grades.

    PEER_SUBMISSION=DIR pytest -c bench/peer/pytest.ini bench/peer/autograder.py -rf
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from grader.truth import corpus, fixture

SUBMISSION = Path(os.environ.get("PEER_SUBMISSION", "exercises"))
EX1 = fixture.EX1_ORDER  # dlogprobs .. dC, in backprop order
EX4_PARAMS = fixture.PARAM_NAMES


def cmp(s, dt, t):
    """Compare a gradient with autograd's, the lecture's way; return whether it is approximately right."""
    ex = torch.all(dt == t.grad).item()
    app = torch.allclose(dt, t.grad)
    maxdiff = (dt - t.grad).abs().max().item()
    print(f"{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}")
    return app


def load(exercise: str):
    """Import a student's exercise file as a module."""
    spec = importlib.util.spec_from_file_location(f"student_{exercise}", SUBMISSION / f"{exercise}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call(fn, available: dict):
    """Call a student function with the inputs its parameters name (cloned, so it cannot spoil the others)."""
    names = inspect.signature(fn).parameters
    args = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in available.items() if k in names}
    with torch.no_grad():
        return fn(**args)


def batch(g: fixture.Geometry):
    """Return the grader's seeded parameters and minibatch for a geometry."""
    train, _, _ = corpus.load(None).split()
    examples = fixture.Examples(train, g.block_size)
    Xb, Yb = fixture.sample_batch(examples, g.n, torch.Generator().manual_seed(g.seed + 1))
    params = fixture.init_params(g)
    for p in params.values():
        p.requires_grad = True
    return params, Xb, Yb


@pytest.fixture(scope="module")
def lecture():
    """Run the lecture's chunked forward pass and loss.backward(); return every tensor by name."""
    p, Xb, Yb = batch(fixture.PRIMARY)
    C, W1, b1, W2, b2, bngain, bnbias = (p[k] for k in EX4_PARAMS)
    n = Xb.shape[0]
    emb = C[Xb]  # embed the characters into vectors
    embcat = emb.view(emb.shape[0], -1)  # concatenate the vectors
    hprebn = embcat @ W1 + b1  # hidden layer pre-activation
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff**2
    bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)  # note: Bessel's correction (dividing by n-1, not n)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)  # hidden layer
    logits = h @ W2 + b2  # output layer
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes  # subtract max for numerical stability
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum**-1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    t = {k: v for k, v in locals().items() if isinstance(v, torch.Tensor) and k not in ("Xb", "Yb")}
    for v in t.values():
        if v.requires_grad and not v.is_leaf:
            v.retain_grad()
    loss.backward()
    return t, {"Xb": Xb, "Yb": Yb, "n": n}


def available(t: dict, extra: dict) -> dict:
    """Return every input a function may ask for: forward tensors, parameters, batch, gradients as d<name>."""
    out = {k: v.detach() for k, v in t.items()}
    out.update({"d" + k: v.grad for k, v in t.items() if v.grad is not None})
    return {**out, **extra}


@pytest.mark.parametrize("name", [f"d{v}" for v in EX1])
def test_ex1(lecture, name):
    t, extra = lecture
    dt = call(getattr(load_once("ex1"), name), available(t, extra))
    assert cmp(name[1:], dt, t[name[1:]])


def test_ex2(lecture):
    t, extra = lecture
    dlogits = call(load_once("ex2").dlogits, available(t, extra))
    assert cmp("logits", dlogits, t["logits"])


def test_ex3(lecture):
    t, extra = lecture
    dhprebn = call(load_once("ex3").dhprebn, available(t, extra))
    assert cmp("hprebn", dhprebn, t["hprebn"])


def compact(p: dict, Xb, Yb) -> dict:
    """Run the lecture's compact Ex4 forward pass and loss.backward(); return every tensor by name."""
    n = Xb.shape[0]
    emb = p["C"][Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ p["W1"] + p["b1"]
    bnmean = hprebn.mean(0, keepdim=True)
    bnvar = hprebn.var(0, keepdim=True, unbiased=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = (hprebn - bnmean) * bnvar_inv
    hpreact = p["bngain"] * bnraw + p["bnbias"]
    h = torch.tanh(hpreact)
    logits = h @ p["W2"] + p["b2"]
    loss = F.cross_entropy(logits, Yb)
    for v in p.values():
        v.grad = None
    loss.backward()
    t = {k: v.detach() for k, v in locals().items() if isinstance(v, torch.Tensor) and k not in ("Xb", "Yb")}
    return {**t, **p, "Xb": Xb, "Yb": Yb, "n": n}


@pytest.fixture(scope="module")
def ex4_step():
    p, Xb, Yb = batch(fixture.EX4_PRIMARY)
    inputs = compact(p, Xb, Yb)
    return p, call(load_once("ex4").backward, inputs)


@pytest.mark.parametrize("param", EX4_PARAMS)
def test_ex4(ex4_step, param):
    p, grads = ex4_step
    dt, t = grads["d" + param], p[param]
    # a whole backward pass in another order than autograd's: float noise needs atol 1e-7, not allclose's 1e-8
    assert torch.allclose(dt, t.grad, atol=1e-7), (param, (dt - t.grad).abs().max().item())


def test_ex4_training():
    """Four SGD steps with the student's backward: every step's gradients must match autograd's."""
    p, _, _ = batch(fixture.EX4_PRIMARY)
    backward = load("ex4").backward
    train, _, _ = corpus.load(None).split()
    examples = fixture.Examples(train, fixture.EX4_PRIMARY.block_size)
    gen = torch.Generator().manual_seed(7)
    for _ in range(4):
        Xb, Yb = fixture.sample_batch(examples, fixture.EX4_PRIMARY.n, gen)
        grads = call(backward, compact(p, Xb, Yb))
        for k, v in p.items():
            assert torch.allclose(grads["d" + k], v.grad, atol=1e-7), k
        with torch.no_grad():
            for v in p.values():
                v -= 0.1 * v.grad


_MODULES: dict = {}


def load_once(exercise: str):
    """Import an exercise file once per run."""
    if exercise not in _MODULES:
        _MODULES[exercise] = load(exercise)
    return _MODULES[exercise]
