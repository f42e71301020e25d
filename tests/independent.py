"""Twenty independently written, correct solutions in different styles, for the similarity check.

Each function has several genuinely different derivations (loops vs index_add_ vs one_hot, different algebraic
forms, helpers, in-place vs functional), and each student combines them with their own naming and layout, the way
a class of twenty writes twenty different files. `copied_and_renamed` is the cheat: one of them, with every local
name changed, comments rewritten and the functions reordered.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

HEADER = [
    "import torch\nimport torch.nn.functional as F\n",
    "import torch\nfrom torch.nn import functional as F\n",
    "import math\nimport torch\nimport torch.nn.functional as F\n",
    "import torch, torch.nn.functional as F\n",
]

# ex1: function -> list of (signature, body) variants; GRAD is the student's name for the local result
EX1 = {
    "dlogprobs": [
        ("logprobs, Yb, n", "GRAD = torch.zeros_like(logprobs)\nGRAD[range(n), Yb] = -1.0 / n\nreturn GRAD"),
        ("logprobs, Yb, n", "return -F.one_hot(Yb, logprobs.shape[1]).float() / n"),
        (
            "logprobs, Yb, n",
            "GRAD = torch.zeros(logprobs.shape)\nfor i in range(n):\n    GRAD[i, Yb[i]] -= 1 / n\nreturn GRAD",
        ),
        (
            "logprobs, Yb",
            "rows = logprobs.shape[0]\nGRAD = logprobs.new_zeros(logprobs.shape)\n"
            "GRAD.scatter_(1, Yb.view(-1, 1), -1.0 / rows)\nreturn GRAD",
        ),
    ],
    "dprobs": [
        ("probs, dlogprobs", "return (1.0 / probs) * dlogprobs"),
        ("probs, dlogprobs", "return dlogprobs / probs"),
        ("probs, dlogprobs", "GRAD = probs.reciprocal()\nGRAD = GRAD * dlogprobs\nreturn GRAD"),
        ("probs, dlogprobs", "return torch.div(dlogprobs, probs)"),
    ],
    "dcounts_sum_inv": [
        ("counts, dprobs", "return (counts * dprobs).sum(1, keepdim=True)"),
        ("counts, dprobs", "GRAD = torch.sum(dprobs * counts, dim=1, keepdim=True)\nreturn GRAD"),
        ("counts, dprobs", "return torch.einsum('ij,ij->i', counts, dprobs).unsqueeze(1)"),
    ],
    "dcounts_sum": [
        ("counts_sum, dcounts_sum_inv", "return (-(counts_sum**-2)) * dcounts_sum_inv"),
        ("counts_sum, dcounts_sum_inv", "return -dcounts_sum_inv / counts_sum**2"),
        ("counts_sum_inv, dcounts_sum_inv", "return -(counts_sum_inv * counts_sum_inv) * dcounts_sum_inv"),
    ],
    "dcounts": [
        (
            "counts, counts_sum_inv, dprobs, dcounts_sum",
            "GRAD = counts_sum_inv * dprobs\nGRAD += torch.ones_like(counts) * dcounts_sum\nreturn GRAD",
        ),
        ("counts_sum_inv, dprobs, dcounts_sum", "return counts_sum_inv * dprobs + dcounts_sum"),
        (
            "counts, counts_sum_inv, dprobs, dcounts_sum",
            "direct = dprobs * counts_sum_inv\nvia_sum = dcounts_sum.expand_as(counts)\nreturn direct + via_sum",
        ),
        (
            "counts, counts_sum_inv, dprobs, dcounts_sum",
            "GRAD = torch.empty_like(counts)\nfor r in range(counts.shape[0]):\n"
            "    GRAD[r] = counts_sum_inv[r] * dprobs[r] + dcounts_sum[r]\nreturn GRAD",
        ),
    ],
    "dnorm_logits": [
        ("counts, dcounts", "return counts * dcounts"),
        ("norm_logits, dcounts", "return norm_logits.exp() * dcounts"),
        ("counts, dcounts", "return torch.mul(dcounts, counts)"),
    ],
    "dlogit_maxes": [
        ("dnorm_logits", "return (-dnorm_logits).sum(1, keepdim=True)"),
        ("dnorm_logits", "return -dnorm_logits.sum(dim=1, keepdim=True)"),
        ("dnorm_logits", "GRAD = dnorm_logits.sum(1)\nreturn -GRAD.view(-1, 1)"),
    ],
    "dlogits": [
        (
            "logits, dnorm_logits, dlogit_maxes",
            "GRAD = dnorm_logits.clone()\nGRAD += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) "
            "* dlogit_maxes\nreturn GRAD",
        ),
        (
            "logits, dnorm_logits, dlogit_maxes",
            "mask = (logits == logits.max(1, keepdim=True).values).float()\nreturn dnorm_logits + mask * dlogit_maxes",
        ),
        (
            "logits, dnorm_logits, dlogit_maxes",
            "GRAD = dnorm_logits.clone()\nwhere = logits.argmax(dim=1)\nfor r in range(logits.shape[0]):\n"
            "    GRAD[r, where[r]] += dlogit_maxes[r, 0]\nreturn GRAD",
        ),
        (
            "logits, dnorm_logits, dlogit_maxes",
            "idx = torch.argmax(logits, 1, keepdim=True)\nextra = torch.zeros_like(logits).scatter_(1, idx, 1.0)\n"
            "return dnorm_logits + extra * dlogit_maxes",
        ),
    ],
    "dh": [
        ("W2, dlogits", "return dlogits @ W2.T"),
        ("W2, dlogits", "return torch.matmul(dlogits, W2.t())"),
        ("W2, dlogits", "return dlogits.mm(W2.transpose(0, 1))"),
    ],
    "dW2": [
        ("h, dlogits", "return h.T @ dlogits"),
        ("h, dlogits", "return torch.mm(h.t(), dlogits)"),
        ("h, dlogits", "return torch.einsum('bi,bj->ij', h, dlogits)"),
    ],
    "db2": [("dlogits", "return dlogits.sum(0)"), ("dlogits", "return torch.sum(dlogits, dim=0)")],
    "dhpreact": [
        ("h, dh", "return (1.0 - h**2) * dh"),
        ("h, dh", "return dh * (1 - h * h)"),
        ("h, dh", "GRAD = 1 - h.pow(2)\nGRAD *= dh\nreturn GRAD"),
        ("hpreact, dh", "t = torch.tanh(hpreact)\nreturn dh * (1.0 - t**2)"),
    ],
    "dbngain": [
        ("bnraw, dhpreact", "return (bnraw * dhpreact).sum(0, keepdim=True)"),
        ("bnraw, dhpreact", "return torch.sum(dhpreact * bnraw, dim=0, keepdim=True)"),
        ("bnraw, dhpreact", "return (bnraw * dhpreact).sum(0).unsqueeze(0)"),
    ],
    "dbnbias": [
        ("dhpreact", "return dhpreact.sum(0, keepdim=True)"),
        ("dhpreact", "return torch.sum(dhpreact, 0, keepdim=True)"),
    ],
    "dbnraw": [("bngain, dhpreact", "return bngain * dhpreact"), ("bngain, dhpreact", "return dhpreact * bngain")],
    "dbnvar_inv": [
        ("bndiff, dbnraw", "return (bndiff * dbnraw).sum(0, keepdim=True)"),
        ("bndiff, dbnraw", "prod = dbnraw * bndiff\nreturn prod.sum(dim=0, keepdim=True)"),
    ],
    "dbnvar": [
        ("bnvar, dbnvar_inv", "return (-0.5 * (bnvar + 1e-5) ** -1.5) * dbnvar_inv"),
        ("bnvar_inv, dbnvar_inv", "return -0.5 * bnvar_inv**3 * dbnvar_inv"),
        ("bnvar, dbnvar_inv", "eps = 1e-5\nreturn dbnvar_inv * (-0.5) / (bnvar + eps) ** 1.5"),
    ],
    "dbndiff2": [
        ("bndiff2, dbnvar, n", "return 1.0 / (n - 1) * torch.ones_like(bndiff2) * dbnvar"),
        ("bndiff2, dbnvar, n", "return dbnvar.expand_as(bndiff2) / (n - 1)"),
        ("bndiff2, dbnvar", "m = bndiff2.shape[0]\nreturn torch.ones_like(bndiff2) * dbnvar / (m - 1)"),
    ],
    "dbndiff": [
        (
            "bndiff, bnvar_inv, dbnraw, dbndiff2",
            "GRAD = bnvar_inv * dbnraw\nGRAD += 2 * bndiff * dbndiff2\nreturn GRAD",
        ),
        ("bndiff, bnvar_inv, dbnraw, dbndiff2", "return dbnraw * bnvar_inv + dbndiff2 * 2.0 * bndiff"),
        (
            "bndiff, bnvar_inv, dbnraw, dbndiff2",
            "through_raw = bnvar_inv * dbnraw\nthrough_sq = 2 * bndiff * dbndiff2\nreturn through_raw + through_sq",
        ),
    ],
    "dbnmeani": [
        ("dbndiff", "return (-dbndiff).sum(0, keepdim=True)"),
        ("dbndiff", "return -torch.sum(dbndiff, 0, keepdim=True)"),
    ],
    "dhprebn": [
        (
            "hprebn, dbndiff, dbnmeani, n",
            "GRAD = dbndiff.clone()\nGRAD += 1.0 / n * torch.ones_like(hprebn) * dbnmeani\nreturn GRAD",
        ),
        ("dbndiff, dbnmeani, n", "return dbndiff + dbnmeani / n"),
        (
            "hprebn, dbndiff, dbnmeani",
            "rows = hprebn.shape[0]\nshare = dbnmeani.expand(rows, -1) / rows\nreturn dbndiff + share",
        ),
    ],
    "dembcat": [("W1, dhprebn", "return dhprebn @ W1.T"), ("W1, dhprebn", "return torch.matmul(dhprebn, W1.t())")],
    "dW1": [("embcat, dhprebn", "return embcat.T @ dhprebn"), ("embcat, dhprebn", "return embcat.t().mm(dhprebn)")],
    "db1": [("dhprebn", "return dhprebn.sum(0)"), ("dhprebn", "return dhprebn.sum(dim=0)")],
    "demb": [
        ("emb, dembcat", "return dembcat.view(emb.shape)"),
        ("emb, dembcat", "return dembcat.reshape(emb.shape)"),
        ("emb, dembcat", "b, t, c = emb.shape\nreturn dembcat.view(b, t, c)"),
    ],
    "dC": [
        (
            "C, Xb, demb",
            "GRAD = torch.zeros_like(C)\nfor k in range(Xb.shape[0]):\n    for j in range(Xb.shape[1]):\n"
            "        ix = Xb[k, j]\n        GRAD[ix] += demb[k, j]\nreturn GRAD",
        ),
        (
            "C, Xb, demb",
            "GRAD = torch.zeros_like(C)\nGRAD.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))\nreturn GRAD",
        ),
        (
            "C, Xb, demb",
            "onehot = F.one_hot(Xb.view(-1), num_classes=C.shape[0]).float()\n"
            "return onehot.T @ demb.view(-1, C.shape[1])",
        ),
        (
            "C, Xb, demb",
            "GRAD = torch.zeros_like(C)\nflat = demb.reshape(-1, C.shape[1])\n"
            "for pos, row in enumerate(Xb.flatten().tolist()):\n    GRAD[row] = GRAD[row] + flat[pos]\nreturn GRAD",
        ),
        (
            "C, Xb, demb",
            "return torch.zeros_like(C).index_put_((Xb.reshape(-1),), demb.reshape(-1, C.shape[1]), accumulate=True)",
        ),
    ],
}

EX2 = [
    ("logits, Yb, n", "GRAD = F.softmax(logits, 1)\nGRAD[range(n), Yb] -= 1\nGRAD /= n\nreturn GRAD"),
    ("logits, Yb, n", "p = logits.softmax(dim=1)\nreturn (p - F.one_hot(Yb, logits.shape[1])) / n"),
    (
        "logits, Yb, n",
        "e = (logits - logits.max(1, keepdim=True).values).exp()\np = e / e.sum(1, keepdim=True)\n"
        "for r in range(n):\n    p[r, Yb[r]] -= 1.0\nreturn p / n",
    ),
    (
        "logits, Yb",
        "m = logits.shape[0]\nGRAD = torch.softmax(logits, -1)\n"
        "GRAD = GRAD.scatter_add(1, Yb.unsqueeze(1), -torch.ones(m, 1))\nreturn GRAD / m",
    ),
]

EX3 = [
    (
        "dhpreact, bngain, bnvar_inv, bnraw, n",
        "return bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * "
        "(dhpreact * bnraw).sum(0))",
    ),
    (
        "dhpreact, bngain, bnvar_inv, bnraw, n",
        "dxhat = dhpreact * bngain\nsum1 = dxhat.sum(0, keepdim=True)\nsum2 = (dxhat * bnraw).sum(0, keepdim=True)\n"
        "return bnvar_inv / n * (n * dxhat - sum1 - n / (n - 1) * bnraw * sum2)",
    ),
    (
        "dhpreact, bngain, bnvar_inv, bnraw, n",
        "g = bngain * dhpreact\nmean_g = g.mean(0, keepdim=True)\nproj = (g * bnraw).sum(0, keepdim=True) / (n - 1)\n"
        "return bnvar_inv * (g - mean_g - bnraw * proj)",
    ),
    (
        "dhpreact, bngain, bnvar_inv, hprebn, n",
        "centred = hprebn - hprebn.mean(0, keepdim=True)\nxhat = centred * bnvar_inv\ndx = dhpreact * bngain\n"
        "a = dx.sum(0, keepdim=True)\nb = (dx * xhat).sum(0, keepdim=True)\n"
        "return (bnvar_inv / n) * (n * dx - a - (n / (n - 1)) * xhat * b)",
    ),
]

EX4_PARAMS = "Xb, Yb, n, C, W1, W2, bngain, emb, embcat, bnraw, bnvar_inv, h, logits"
EX4_PARTS = {
    "ce": [
        "dlogits = F.softmax(logits, 1)\ndlogits[range(n), Yb] -= 1\ndlogits /= n",
        "dlogits = (torch.softmax(logits, dim=1) - F.one_hot(Yb, logits.shape[1])) / n",
        "probs = logits.exp()\nprobs = probs / probs.sum(1, keepdim=True)\n"
        "for r in range(n):\n    probs[r, Yb[r]] -= 1\n"
        "dlogits = probs / n",
    ],
    "out": [
        "dh = dlogits @ W2.T\ndW2 = h.T @ dlogits\ndb2 = dlogits.sum(0)",
        "dW2 = torch.mm(h.t(), dlogits)\ndb2 = torch.sum(dlogits, 0)\ndh = torch.mm(dlogits, W2.t())",
    ],
    "tanh": ["dhpreact = (1.0 - h**2) * dh", "dhpreact = dh * (1 - h * h)"],
    "bn": [
        "dbngain = (bnraw * dhpreact).sum(0, keepdim=True)\ndbnbias = dhpreact.sum(0, keepdim=True)\n"
        "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * "
        "(dhpreact * bnraw).sum(0))",
        "dbnbias = torch.sum(dhpreact, 0, keepdim=True)\ndbngain = torch.sum(bnraw * dhpreact, 0, keepdim=True)\n"
        "g = bngain * dhpreact\n"
        "dhprebn = bnvar_inv * (g - g.mean(0, keepdim=True) - bnraw * (g * bnraw).sum(0, keepdim=True) / (n - 1))",
    ],
    "lin": [
        "dembcat = dhprebn @ W1.T\ndW1 = embcat.T @ dhprebn\ndb1 = dhprebn.sum(0)",
        "db1 = dhprebn.sum(dim=0)\ndW1 = embcat.t().mm(dhprebn)\ndembcat = dhprebn.mm(W1.t())",
    ],
    "emb": [
        "demb = dembcat.view(emb.shape)\ndC = torch.zeros_like(C)\n"
        "dC.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))",
        "demb = dembcat.reshape(emb.shape)\ndC = torch.zeros_like(C)\nfor i in range(Xb.shape[0]):\n"
        "    for j in range(Xb.shape[1]):\n        dC[Xb[i, j]] += demb[i, j]",
        "dC = F.one_hot(Xb.flatten(), C.shape[0]).float().T @ dembcat.reshape(-1, C.shape[1])",
    ],
}
EX4_RETURN = [
    'return {"dC": dC, "dW1": dW1, "db1": db1, "dW2": dW2, "db2": db2, "dbngain": dbngain, "dbnbias": dbnbias}',
    "return dict(dC=dC, dW1=dW1, db1=db1, dW2=dW2, db2=db2, dbngain=dbngain, dbnbias=dbnbias)",
    "grads = {}\nfor name, value in [('dC', dC), ('dW1', dW1), ('db1', db1), ('dW2', dW2), ('db2', db2),"
    " ('dbngain', dbngain), ('dbnbias', dbnbias)]:\n    grads[name] = value\nreturn grads",
]
GRAD_NAMES = ["d", "grad", "out", "result", "g", "res", "dx", "answer", "ret", "acc"]
COMMENTS = ["# chain rule", "# local derivative times the upstream gradient", "# backprop step", "# see lecture", ""]


def _indent(body: str, pad: str = "    ") -> str:
    return "\n".join(pad + line if line else line for line in body.splitlines())


def _function(name, sig, body, rng, style) -> str:
    body = body.replace("GRAD", style["grad"])
    comment = rng.choice(COMMENTS)
    lines = [f"def {name}({sig}):"]
    if style["docstrings"]:
        lines.append(f'    """{rng.choice(["Backprop for", "Gradient of the loss w.r.t.", "Returns d"])} {name}."""')
    if comment:
        lines.append("    " + comment)
    lines.append(_indent(body))
    return "\n".join(lines) + "\n"


def student_files(k: int) -> dict[str, str]:
    """Return the four exercise files of independent student k (0..19)."""
    rng = random.Random(1000 + k)
    style = {"grad": GRAD_NAMES[k % len(GRAD_NAMES)], "docstrings": k % 3 == 0}
    gap = "\n\n" if k % 2 else "\n\n\n"
    header = HEADER[k % len(HEADER)]
    funcs = [_function(name, *variants[rng.randrange(len(variants))], rng, style) for name, variants in EX1.items()]
    files = {"ex1.py": header + gap + gap.join(funcs)}
    files["ex2.py"] = header + gap + _function("dlogits", *EX2[(k + rng.randrange(2)) % len(EX2)], rng, style)
    files["ex3.py"] = header + gap + _function("dhprebn", *EX3[(k * 3 + rng.randrange(3)) % len(EX3)], rng, style)
    parts = [v[rng.randrange(len(v))] for v in EX4_PARTS.values()]
    if k % 4 == 1:  # helpers instead of one long function
        helper = "def _softmax_grad(logits, Yb, n):\n" + _indent(parts[0] + "\nreturn dlogits") + "\n"
        parts[0] = "dlogits = _softmax_grad(logits, Yb, n)"
        body = "\n".join(parts + [EX4_RETURN[k % 3]])
        files["ex4.py"] = header + gap + helper + gap + f"def backward({EX4_PARAMS}):\n" + _indent(body) + "\n"
    else:
        body = "\n".join(parts + [EX4_RETURN[k % 3]])
        files["ex4.py"] = header + gap + f"def backward({EX4_PARAMS}):\n" + _indent(body) + "\n"
    return files


class _Renamer(ast.NodeTransformer):
    """Rename every local variable of a function (never a parameter: the grader binds those by name)."""

    def visit_FunctionDef(self, node):
        params = {a.arg for a in node.args.args}
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.mapping = {name: f"my_{name}_v2" for name in stored - params}
        self.generic_visit(node)
        return node

    def visit_Name(self, node):
        node.id = getattr(self, "mapping", {}).get(node.id, node.id)
        return node


def copied_and_renamed(files: dict[str, str]) -> dict[str, str]:
    """Return a copy with every local renamed, comments and docstrings dropped, layout redone, functions reordered."""
    out = {}
    for name, text in files.items():
        tree = _Renamer().visit(ast.parse(text))
        imports = [n for n in tree.body if not isinstance(n, ast.FunctionDef)]
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        for d in defs:
            if d.body and isinstance(d.body[0], ast.Expr) and isinstance(d.body[0].value, ast.Constant):
                d.body = d.body[1:]
        tree.body = imports + list(reversed(defs))
        out[name] = "# " + name + ": my own work\n" + ast.unparse(tree) + "\n"
    return out


def write_class(root: Path, copy_of: int | None = 3) -> list[str]:
    """Write the 20 independent students (and the copier of student `copy_of`) under root; return their ids."""
    ids = []
    for k in range(20):
        sid = f"indep{k:02d}"
        (root / sid).mkdir(parents=True)
        for name, text in student_files(k).items():
            (root / sid / name).write_text(text)
        ids.append(sid)
    if copy_of is not None:
        (root / "copier").mkdir()
        for name, text in copied_and_renamed(student_files(copy_of)).items():
            (root / "copier" / name).write_text(text)
        ids.append("copier")
    return ids
