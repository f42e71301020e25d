"""A notebook in the lecture's layout, answered the lecture's way: the fixture the notebook tests grade."""

from __future__ import annotations

from textwrap import indent

import nbformat
from nbformat import v4

SETUP = [
    ("markdown", "## makemore: becoming a backprop ninja"),
    ("code", "import torch\nimport torch.nn.functional as F\nimport matplotlib.pyplot as plt\n%matplotlib inline"),
    ("code", "# the names file\n!wget https://example.invalid/names.txt"),
    ("code", "words = open('names.txt', 'r').read().splitlines()\nprint(len(words))"),
    (
        "code",
        "chars = sorted(list(set(''.join(words))))\nstoi = {s: i + 1 for i, s in enumerate(chars)}\nstoi['.'] = 0\n"
        "itos = {i: s for s, i in stoi.items()}\nvocab_size = len(itos)",
    ),
    (
        "code",
        "block_size = 3\n\ndef build_dataset(words):\n    X, Y = [], []\n    for w in words:\n"
        "        context = [0] * block_size\n        for ch in w + '.':\n            ix = stoi[ch]\n"
        "            X.append(context)\n            Y.append(ix)\n            context = context[1:] + [ix]\n"
        "    return torch.tensor(X), torch.tensor(Y)\n\nXtr, Ytr = build_dataset(words)",
    ),
    (
        "code",
        "def cmp(s, dt, t):\n    ex = torch.all(dt == t.grad).item()\n    app = torch.allclose(dt, t.grad)\n"
        "    maxdiff = (dt - t.grad).abs().max().item()\n"
        "    print(f'{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}')",
    ),
    (
        "code",
        "n_embd = 10\nn_hidden = 64\ng = torch.Generator().manual_seed(2147483647)\n"
        "C = torch.randn((vocab_size, n_embd), generator=g)\n"
        "W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)\n"
        "b1 = torch.randn(n_hidden, generator=g) * 0.1\nW2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1\n"
        "b2 = torch.randn(vocab_size, generator=g) * 0.1\nbngain = torch.randn((1, n_hidden)) * 0.1 + 1.0\n"
        "bnbias = torch.randn((1, n_hidden)) * 0.1\nparameters = [C, W1, b1, W2, b2, bngain, bnbias]\n"
        "for p in parameters:\n    p.requires_grad = True",
    ),
    (
        "code",
        "batch_size = 32\nn = batch_size\nix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)\n"
        "Xb, Yb = Xtr[ix], Ytr[ix]",
    ),
    (
        "code",
        "# forward pass, one small step at a time\nemb = C[Xb]\nembcat = emb.view(emb.shape[0], -1)\n"
        "hprebn = embcat @ W1 + b1\nbnmeani = 1/n*hprebn.sum(0, keepdim=True)\nbndiff = hprebn - bnmeani\n"
        "bndiff2 = bndiff**2\nbnvar = 1/(n-1)*(bndiff2).sum(0, keepdim=True)\nbnvar_inv = (bnvar + 1e-5)**-0.5\n"
        "bnraw = bndiff * bnvar_inv\nhpreact = bngain * bnraw + bnbias\nh = torch.tanh(hpreact)\n"
        "logits = h @ W2 + b2\nlogit_maxes = logits.max(1, keepdim=True).values\n"
        "norm_logits = logits - logit_maxes\ncounts = norm_logits.exp()\ncounts_sum = counts.sum(1, keepdims=True)\n"
        "counts_sum_inv = counts_sum**-1\nprobs = counts * counts_sum_inv\nlogprobs = probs.log()\n"
        "loss = -logprobs[range(n), Yb].mean()\n\nfor p in parameters:\n    p.grad = None\n"
        "for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes, logits, h, "
        "hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani, embcat, emb]:\n    t.retain_grad()\n"
        "loss.backward()\nloss",
    ),
]

DC_LOOP = (
    "dC = torch.zeros_like(C)\nfor k in range(Xb.shape[0]):\n    for j in range(Xb.shape[1]):\n"
    "        ix = Xb[k,j]\n        dC[ix] += demb[k,j]"
)
DC_REPEATED = "dC = torch.zeros_like(C)\ndC[Xb] += demb"

EX1 = """# Exercise 1: backprop through the whole thing manually,
# one variable at a time, in the order of the forward pass above

dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0/n
dprobs = (1.0 / probs) * dlogprobs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts = counts_sum_inv * dprobs
dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
dcounts += torch.ones_like(counts) * dcounts_sum
dnorm_logits = counts * dcounts
dlogits = dnorm_logits.clone()
dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnraw = bngain * dhpreact
dbnbias = dhpreact.sum(0, keepdim=True)
dbndiff = bnvar_inv * dbnraw
dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
dbnvar = (-0.5*(bnvar + 1e-5)**-1.5) * dbnvar_inv
dbndiff2 = (1.0/(n-1))*torch.ones_like(bndiff2) * dbnvar
dbndiff += (2*bndiff) * dbndiff2
dhprebn = dbndiff.clone()
dbnmeani = (-dbndiff).sum(0)
dhprebn += 1.0/n * (torch.ones_like(hprebn) * dbnmeani)
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
{dC}

cmp('logprobs', dlogprobs, logprobs)
cmp('probs', dprobs, probs)
cmp('emb', demb, emb)
cmp('C', dC, C)"""

EX2_FORWARD = """# Exercise 2: backprop through cross_entropy but all in one go
loss_fast = F.cross_entropy(logits, Yb)
print(loss_fast.item(), 'diff:', (loss_fast - loss).item())"""

EX2 = """# backward pass

dlogits = F.softmax(logits, 1)
dlogits[range(n), Yb] -= 1
dlogits /= n

cmp('logits', dlogits, logits)"""

EX3_FORWARD = """# Exercise 3: backprop through batchnorm but all in one go
hpreact_fast = bngain * (hprebn - hprebn.mean(0, keepdim=True)) / torch.sqrt(hprebn.var(0, keepdim=True, unbiased=True) + 1e-5) + bnbias
print('max diff:', (hpreact_fast - hpreact).abs().max())"""  # noqa: E501

EX3 = """# backward pass: dhprebn from dhpreact in one expression

dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))

cmp('hprebn', dhprebn, hprebn)"""

EX4_INIT = """# Exercise 4: putting it all together!
# Train the MLP neural net with your own backward pass

n_embd = 10
n_hidden = 200
g = torch.Generator().manual_seed(2147483647)
C = torch.randn((vocab_size, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
b2 = torch.randn(vocab_size, generator=g) * 0.1
bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
bnbias = torch.randn((1, n_hidden)) * 0.1
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
for p in parameters:
    p.requires_grad = True
max_steps = 200000
batch_size = 32
n = batch_size
lossi = []"""

EX4_BACKPROP = """# manual backprop!
dlogits = F.softmax(logits, 1)
dlogits[range(n), Yb] -= 1
dlogits /= n
# 2nd layer
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
# tanh
dhpreact = (1.0 - h**2) * dh
# batchnorm
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnbias = dhpreact.sum(0, keepdim=True)
dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0) - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
# 1st layer
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
# embedding
demb = dembcat.view(emb.shape)
dC = torch.zeros_like(C)
for k in range(Xb.shape[0]):
    for j in range(Xb.shape[1]):
        ix = Xb[k,j]
        dC[ix] += demb[k,j]
"""

EX4_LOOP = """with torch.no_grad():
    for i in range(max_steps):
        ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]

        # forward pass
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmean = hprebn.mean(0, keepdim=True)
        bnvar = hprebn.var(0, keepdim=True, unbiased=True)
        bnvar_inv = (bnvar + 1e-5)**-0.5
        bnraw = (hprebn - bnmean) * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)

        # backward pass
        for p in parameters:
            p.grad = None
        {backward}loss.backward() # use this for correctness comparisons, delete it later!

{manual}        grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]

        # update
        lr = 0.1 if i < 100000 else 0.01
        for p, grad in zip(parameters, grads):
            p.data += -lr * grad

        if i % 10000 == 0:
            print(f'{i:7d}/{max_steps:7d}: {loss.item():.4f}')
        lossi.append(loss.log10().item())"""

TAIL = [
    (
        "code",
        "# useful for checking your gradients\n"
        "# for p,g in zip(parameters, grads):\n#   cmp(str(tuple(p.shape)), g, p)",
    ),
    (
        "code",
        "with torch.no_grad():\n    emb = C[Xtr]\n    embcat = emb.view(emb.shape[0], -1)\n"
        "    hpreact = embcat @ W1 + b1\n    bnmean = hpreact.mean(0, keepdim=True)\n"
        "    bnvar = hpreact.var(0, keepdim=True, unbiased=True)",
    ),
]


def lecture_cells(dc: str = DC_LOOP, autograd: bool = False) -> list[tuple[str, str]]:
    """Return the lecture-layout cells as (kind, text); `dc` is Ex1's dC code, autograd keeps Ex4's backward()."""
    middle = [
        ("code", EX1.format(dC=dc)),
        ("code", EX2_FORWARD),
        ("code", EX2),
        ("code", "logits.shape, Yb.shape"),
        ("code", "plt.figure(figsize=(8, 8))\nplt.imshow(dlogits.detach(), cmap='gray')"),
        ("code", EX3_FORWARD),
        ("code", EX3),
        ("code", EX4_INIT),
        (
            "code",
            EX4_LOOP.replace("{backward}", "" if autograd else "#").replace("{manual}", indent(EX4_BACKPROP, " " * 8)),
        ),
    ]
    return SETUP + middle + TAIL


def notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """Return an nbformat v4 notebook of (kind, text) cells."""
    nb = v4.new_notebook()
    nb.cells = [v4.new_code_cell(text) if kind == "code" else v4.new_markdown_cell(text) for kind, text in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write(path, cells: list[tuple[str, str]]):
    """Write the cells as an .ipynb file and return its path."""
    nbformat.write(notebook(cells), str(path))
    return path
