"""The student notebook: the lecture's layout on the grader's own model and batch, with a check() per exercise."""

from __future__ import annotations

from pathlib import Path

NAME = "backprop_ninja.ipynb"

INTRO = """# Becoming a backprop ninja

Run the cells from the top. Each exercise has one empty cell: write the gradients there, the lecture's way, as
straight-line code (`dlogprobs = ...`, `dprobs = ...`). Then run the `check(...)` cell under it: it grades the
cells you have run in this kernel, in the grader's sandbox, against autograd. `check()` alone grades all four.

The model and the batch are the grader's own (seeded, with the names corpus built in), so nothing is
downloaded and your numbers match what the grader checks. You can also grade the saved notebook from a
terminal: `grade all --submission backprop_ninja.ipynb`.

**In Colab** (or any runtime without the grader): upload `bundle.zip`, the folder `grade release` wrote, zipped
(Files, on the left; or the unzipped folder as `bundle/`), and run the first cell: it installs the grader from it
with pip, keeping the runtime's own torch. Where the grader is installed already, the first cell does nothing."""

INSTALL = """# Install the grader where it is not yet (Colab): from bundle.zip, or the folder bundle/, beside this
# notebook: `pip install -q ./bundle`, which keeps the runtime's own torch.
import importlib
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

if importlib.util.find_spec("grader") is None:
    if not Path("bundle").is_dir():
        if not Path("bundle.zip").is_file():
            raise FileNotFoundError(f"no bundle.zip in {Path.cwd()}: upload it (Files, on the left), run this again")
        zipfile.ZipFile("bundle.zip").extractall("bundle")
    found = sorted(Path("bundle").glob("**/pyproject.toml"), key=lambda p: len(p.parts))
    if not found:
        raise FileNotFoundError("bundle/ holds no pyproject.toml: zip the whole folder that `grade release` wrote")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", str(found[0].parent.resolve())], check=True)
    importlib.invalidate_caches()
print("grader", "installed" if importlib.util.find_spec("grader") else "NOT installed")"""

SETUP = """import torch
import torch.nn.functional as F
from grader.cli import check
from grader.truth import corpus
from grader.truth import fixture

fx = fixture.build(fixture.PRIMARY)  # the grader's model and batch: n=32, block_size=3, n_embd=10, n_hidden=64
C, W1, b1, W2, b2, bngain, bnbias = [fx.params[k].clone() for k in fixture.PARAM_NAMES]
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
for p in parameters:
    p.requires_grad = True
Xb, Yb = fx.Xb, fx.Yb
n = Xb.shape[0]"""

CMP = """def cmp(s, dt, t):
    \"\"\"Compare a gradient you derived with the one autograd stored in t.grad.\"\"\"
    exact = torch.all(dt == t.grad).item()
    close = torch.allclose(dt, t.grad)
    worst = (dt - t.grad).abs().max().item()
    print(f"{s:15s} | exact: {str(exact):5s} | approximate: {str(close):5s} | maxdiff: {worst}")"""

FORWARD = """# the forward pass, cut into steps small enough to backpropagate through one at a time
emb = C[Xb]
embcat = emb.view(emb.shape[0], -1)
hprebn = embcat @ W1 + b1
bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
bndiff = hprebn - bnmeani
bndiff2 = bndiff**2
bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdim=True)  # Bessel's correction: 1/(n-1)
bnvar_inv = (bnvar + 1e-5) ** -0.5
bnraw = bndiff * bnvar_inv
hpreact = bngain * bnraw + bnbias
h = torch.tanh(hpreact)
logits = h @ W2 + b2
logit_maxes = logits.max(1, keepdim=True).values
norm_logits = logits - logit_maxes
counts = norm_logits.exp()
counts_sum = counts.sum(1, keepdim=True)
counts_sum_inv = counts_sum**-1
probs = counts * counts_sum_inv
logprobs = probs.log()
loss = -logprobs[range(n), Yb].mean()

# autograd's answer, for cmp() only: the grader has its own
for t in [logprobs, probs, counts_sum_inv, counts_sum, counts, norm_logits, logit_maxes, logits, h, hpreact,
          bnraw, bnvar_inv, bnvar, bndiff2, bndiff, bnmeani, hprebn, embcat, emb]:
    t.retain_grad()
loss.backward()
loss.item()"""

EX1_MD = """## Exercise 1: backprop through every step

Assign each gradient in backprop order, one statement (or a few) per gradient, every path summed:
`dlogprobs`, `dprobs`, `dcounts_sum_inv`, `dcounts_sum`, `dcounts`, `dnorm_logits`, `dlogit_maxes`, `dlogits`,
`dh`, `dW2`, `db2`, `dhpreact`, `dbngain`, `dbnbias`, `dbnraw`, `dbnvar_inv`, `dbnvar`, `dbndiff2`, `dbndiff`,
`dbnmeani`, `dhprebn`, `dembcat`, `dW1`, `db1`, `demb`, `dC`. Each gradient has exactly its variable's shape.
The grader grades every one on its own, giving it the true value of the gradients before it."""

EX1 = """# Exercise 1: assign dlogprobs, dprobs, ... dC here, in backprop order

"""

EX2_MD = """## Exercise 2: cross-entropy in one go

Assign `dlogits` straight from `logits`, `Yb` and `n`, without the intermediate steps:
the forward is `loss = F.cross_entropy(logits, Yb)`."""

EX2 = """# Exercise 2: assign dlogits here

"""

EX3_MD = """## Exercise 3: BatchNorm in one go

Assign `dhprebn` from `dhpreact` and the forward tensors (`bngain`, `bnvar_inv`, `bnraw`, `n`, ...), through the
whole BatchNorm layer at once."""

EX3 = """# Exercise 3: assign dhprebn here

"""

EX4_MD = """## Exercise 4: train with your own backward pass

The loop below trains the lecture's network (n_hidden=200) without autograd. Write the manual backprop in the
marked place: every gradient from `dlogits` down to `dC`. Raise `max_steps` to train for real."""

EX4_INIT = """# Exercise 4: putting it all together
examples = fixture.Examples(corpus.load().split()[0], fixture.EX4_PRIMARY.block_size)
C, W1, b1, W2, b2, bngain, bnbias = [fixture.init_params(fixture.EX4_PRIMARY)[k] for k in fixture.PARAM_NAMES]
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
g = torch.Generator().manual_seed(42)
n = 32
max_steps = 1000
lossi = []"""

EX4 = """with torch.no_grad():
    for i in range(max_steps):
        Xb, Yb = fixture.sample_batch(examples, n, g)
        # forward pass
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

        # manual backprop: assign dlogits ... dC here (no loss.backward())

        grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
        lr = 0.1
        for p, grad in zip(parameters, grads):
            p.data += -lr * grad
        lossi.append(loss.item())
print(f"loss after {max_steps} steps: {loss.item():.4f}")"""


def cells() -> list[tuple[str, str]]:
    """Return the notebook's cells as (kind, text)."""
    return [
        ("markdown", INTRO),
        ("code", INSTALL),
        ("code", SETUP),
        ("code", CMP),
        ("code", FORWARD),
        ("markdown", EX1_MD),
        ("code", EX1),
        ("code", 'check("ex1")'),
        ("markdown", EX2_MD),
        ("code", EX2),
        ("code", 'check("ex2")'),
        ("markdown", EX3_MD),
        ("code", EX3),
        ("code", 'check("ex3")'),
        ("markdown", EX4_MD),
        ("code", EX4_INIT),
        ("code", EX4),
        ("code", 'check("ex4")'),
    ]


def notebook():
    """Return the student notebook as an nbformat v4 node."""
    from nbformat import v4

    nb = v4.new_notebook()
    nb.cells = [v4.new_code_cell(text) if kind == "code" else v4.new_markdown_cell(text) for kind, text in cells()]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write_student_notebook(folder: Path) -> Path:
    """Write backprop_ninja.ipynb into folder and return its path."""
    import nbformat

    path = Path(folder) / NAME
    nbformat.write(notebook(), str(path))
    return path
