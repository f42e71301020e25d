"""The honest student is never hurt: correct submissions with one everyday habit each get full marks, nothing else.

Each file in tests/honest is one habit. Its first line says which exercise it belongs to:

    # honest: exercise=ex1 habit=<words>

and an optional second line how the exercise file is built from it:

    # honest-file: whole crlf bom

By default the case is appended to the reference solution of its exercise (later definitions win, as in
tests/hostile); `whole` makes the case the entire exercise file (for `from __future__ import annotations`),
`crlf` writes Windows line ends and `bom` a UTF-8 byte order mark. Every case must stay a correct solution.

Each case is graded with the real command, `python -m grader EX --submission DIR --json`, on both sandbox
backends: the default (`fork` on Linux) and `GRADER_SANDBOX=spawn` (the laptop path). It must score full marks with
no trap, no message, no problem, no flag and no word of autograd or internals. To keep the file fast, cases that do
not redefine the same names share one exercise file, and one submission holds a group of each exercise.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.grading.scan import scan
from tests.conftest import REFERENCE, ROOT, make_submission

HONEST = Path(__file__).parent / "honest"
_HEADER = re.compile(r"#\s*honest:\s*exercise=(ex[1-4])\s+habit=(.+)")
_OPTIONS = re.compile(r"#\s*honest-file:\s*(.*)")
BACKENDS = ("fork", "spawn")
WRONGDOING = ("uses-autograd", "private_internals", "flagged", "autograd")

# Habits the sandbox refuses today. Each is graded alone, so it cannot spoil the cases it would share a file with.
# {case: (backends, the words the failure must contain, reason)}: the test fails as expected only when the grade
# says exactly this (any other failure is a real one), and strict: a case that starts passing must leave the table.
NOT_ALLOWED = "the child's import allow-list (child.ALLOWED_IMPORTS) lacks it; the system-call filter would not"
XFAIL: dict = {}  # none left: logging, warnings, time, requires_grad_(False), numpy printing, assert_close


class KnownHurt(AssertionError):
    """The failure an XFAIL entry names: raised only when the grade says the words the entry expects."""


@dataclass(frozen=True)
class Case:
    path: Path
    exercise: str
    habit: str
    options: frozenset

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def alone(self) -> bool:
        return "whole" in self.options or self.name in XFAIL

    def names(self) -> set[str]:
        """Return the top-level names the case defines (functions, classes, assigned globals), not its imports."""
        found = set()
        for node in ast.parse(self.path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return found


def read_case(path: Path) -> Case:
    lines = path.read_text().splitlines()
    match = _HEADER.fullmatch(lines[0].strip())
    assert match, f"{path.name}: the first line must be '# honest: exercise=exN habit=...'"
    options = _OPTIONS.fullmatch(lines[1].strip()) if len(lines) > 1 else None
    return Case(path, match[1], match[2].strip(), frozenset(options[1].split() if options else ()))


CASES = [read_case(p) for p in sorted(HONEST.glob("*.py"))]


def exercise_text(cases: list[Case], exercise: str) -> tuple[bytes, dict[str, range]]:
    """Return one exercise file holding these cases, and the lines each case occupies in it."""
    if len(cases) == 1 and "whole" in cases[0].options:
        text, spans = cases[0].path.read_text(), {cases[0].name: range(1, 10**9)}
    else:
        text, spans = (REFERENCE / f"{exercise}.py").read_text(), {}
        for case in cases:
            text += "\n\n"
            start = text.count("\n") + 1
            text += case.path.read_text()
            spans[case.name] = range(start, text.count("\n") + 2)
    options = set().union(*(c.options for c in cases))
    if "crlf" in options:
        text = text.replace("\n", "\r\n")
    data = text.encode()
    if "bom" in options:
        data = b"\xef\xbb\xbf" + data
    return data, spans


def plan(cases: list[Case]) -> list[dict[str, list[Case]]]:
    """Group the cases into submissions: per exercise, cases that define different names share a file."""
    groups: dict[str, list[list[Case]]] = {}
    for case in cases:
        rows = groups.setdefault(case.exercise, [])
        for row in rows:
            if not case.alone and not any(c.alone for c in row) and not any(case.names() & c.names() for c in row):
                row.append(case)
                break
        else:
            rows.append([case])
    depth = max(len(rows) for rows in groups.values())
    return [{ex: rows[k] for ex, rows in groups.items() if k < len(rows)} for k in range(depth)]


BUNDLES = plan(CASES)
BUNDLE_OF = {c.name: k for k, bundle in enumerate(BUNDLES) for row in bundle.values() for c in row}


@dataclass
class Graded:
    result: dict
    stderr: str
    spans: dict[str, dict[str, range]]  # exercise -> case -> lines


def grade_bundle(k: int, backend: str, root: Path) -> Graded:
    bundle = BUNDLES[k]
    folder = make_submission(root / f"bundle{k}-{backend}")
    spans = {}
    for ex, cases in bundle.items():
        data, spans[ex] = exercise_text(cases, ex)
        (folder / f"{ex}.py").write_bytes(data)
    env = {key: value for key, value in os.environ.items() if key != "GRADER_SANDBOX"}
    if backend == "spawn":
        env["GRADER_SANDBOX"] = "spawn"
    which = next(iter(bundle)) if len(bundle) == 1 else "all"
    command = [sys.executable, "-m", "grader", which, "--submission", str(folder), "--json"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"{' '.join(command)} printed no JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return Graded(result, done.stderr, spans)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    cache: dict[tuple[int, str], Graded] = {}
    root = tmp_path_factory.mktemp("honest")

    def get(k: int, backend: str) -> Graded:
        if (k, backend) not in cache:
            cache[k, backend] = grade_bundle(k, backend, root)
        return cache[k, backend]

    return get


def _params():
    for backend in BACKENDS:
        for case in CASES:
            marks = []
            if case.name in XFAIL and backend in XFAIL[case.name][0]:
                _, words, why = XFAIL[case.name]
                marks.append(pytest.mark.xfail(strict=True, raises=KnownHurt, reason=f"{words}: {why}"))
            yield pytest.param(case, backend, id=f"{backend}-{case.name}", marks=marks)


@pytest.mark.parametrize(("case", "backend"), list(_params()))
def test_honest_habit_gets_full_marks_and_no_flag(graded, case, backend):
    got = graded(BUNDLE_OF[case.name], backend)
    try:
        assert_unhurt(case, got)
    except AssertionError as exc:
        words = XFAIL[case.name][1] if case.name in XFAIL and backend in XFAIL[case.name][0] else None
        ex = case.exercise
        said = json.dumps([[i for i in got.result["items"] if i["exercise"] == ex], got.result.get("problems", [])])
        if words and words in said:
            raise KnownHurt(f"{case.name} on {backend}: {words}") from exc
        raise


def assert_unhurt(case: Case, got: Graded) -> None:
    """Full marks on the case's exercise; no trap, message, problem, note or flag; no word of wrongdoing."""
    ex, result = case.exercise, got.result
    spans = got.spans[ex]
    sharing = ", ".join(sorted(spans))
    items = [i for i in result["items"] if i["exercise"] == ex]
    bad = [(i["id"], i["status"], i["traps"], i["message"]) for i in items if i["status"] != "passed" or i["message"]]
    assert items and not bad, f"{case.habit} ({ex}.py holding {sharing}): {bad}"
    assert all(i["traps"] == [] for i in items)
    assert sum(i["score"] for i in items) == sum(i["max_score"] for i in items) > 0
    if len({i["exercise"] for i in result["items"]}) == 1:
        assert result["score"] == result["max_score"]
    flags = [f for f in result.get("flags", {}).get("private_internals", []) if f["exercise"] == ex]
    owners = {f["line"]: [c for c, lines in spans.items() if f["line"] in lines] for f in flags}
    assert not flags, f"false flags in {ex}.py: {flags} (lines of cases {owners})"
    assert set(result.get("flags", {})) <= {"private_internals"}, result["flags"]
    problems = [p for p in result.get("problems", []) if p.get("exercise") in (ex, None)]
    assert not problems, problems
    notes = [n for n in result.get("notes", []) if ex in str(n)]
    assert not notes, notes
    said = json.dumps([items, flags, problems]).lower()
    assert not [w for w in WRONGDOING if w in said], said
    assert "flagged for your instructor" not in got.stderr


def test_every_case_is_well_formed():
    assert len(CASES) >= 30
    assert set(XFAIL) <= {c.name for c in CASES}
    for case in CASES:
        assert case.options <= {"whole", "crlf", "bom"}, case.name
        assert case.options <= {"whole"} or "whole" in case.options, f"{case.name}: crlf and bom need whole"
        compile(case.path.read_text(), str(case.path), "exec")
    assert len(BUNDLES) <= 5, "too many submissions to grade (each costs ~8 s): share files between cases"


# --- the parent's scan: honest habits raise no flag, their hostile look-alikes still do --------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_scan_raises_no_flag_on_an_honest_habit(case):
    data, _ = exercise_text([case], case.exercise)
    text = data.decode("utf-8-sig").replace("\r\n", "\n")
    assert scan(case.exercise, text) == ()


OWN_NAMES_STAY_OWN = {
    "a method's private attributes": "class A:\n    def __init__(self):\n        self._saved = 1\n"
    "    def f(self):\n        return self._saved\n",
    "a dataclass's private field": "@dataclass\nclass S:\n    _h: int = 0\n\ndef f(s):\n    return s._h\n",
    "a method named like a kernel": "class T:\n    def tanh_backward(self, d):\n        return d\n\n"
    "def f(d):\n    return T().tanh_backward(d)\n",
    "a class's name in __repr__": "class A:\n    def __repr__(self):\n        return self.__class__.__name__\n",
    "another of the file's own objects": "class A:\n    def copy(self):\n        return self.__class__()\n",
    "the parent class's repr": "class A:\n    def __repr__(self):\n        return 'A ' + super().__repr__()\n",
    "a function's module and a class by getattr": "def f(g):\n    return g.__module__, getattr(g, '__class__')\n",
    "a local vars": "def f(x):\n    vars = [x]\n    return vars[0]\n",
    "a parameter vars": "def f(vars=None):\n    return vars\n",
    "a closure's vars": "def f():\n    vars = 1\n    def g():\n        return vars\n    return g\n",
    "a nonlocal vars": "def f():\n    vars = 1\n    def g():\n        nonlocal vars\n        vars += 1\n    return g\n",
    "a comprehension's eval": "def f(xs):\n    return [eval for eval in xs]\n",
    "a function's locals() in a format": 'def f(x):\n    return "{x}".format(**locals())\n',
    "a function's vars() in a % format": 'def f(x):\n    return "%(x)s" % vars()\n',
    "a class body's locals()": "class K:\n    a = 1\n    names = sorted(locals())\n",
    "a nested default, in its function": "def g():\n    def f(d=locals()):\n        return d\n    return f\n",
    "a comprehension's later iterable": "z = [y for x in range(2) for y in locals()]\n",
    "vars caught as an exception": "def f():\n    try:\n        pass\n    except ValueError as vars:\n"
    "        return vars\n",
}

LOOKALIKES_STAY_FLAGGED = {
    # a method called with another object as self reads the real internal: defining the name does not own it
    "self._C on a foreign self": "class K:\n    def __init__(self):\n        self._C = 0\n"
    "    def peek(self):\n        return self._C\n\nK.peek(torch)\n",
    "a class attribute named like an engine": "class K:\n    _execution_engine = None\n\n"
    "def f(v):\n    return v._execution_engine\n",
    "a method named like a public kernel": "class K:\n    def batch_norm_backward_elemt(self):\n        pass\n\n"
    "x = torch.batch_norm_backward_elemt\n",
    "a private attribute no class defines": "class K:\n    pass\n\ndef f(t):\n    return t._version\n",
    "a dunder defined by the file": "class K:\n    def __init__(self):\n        self.__dict__ = {}\n\n"
    "def f(t):\n    return t.__dict__\n",
    "__class__ read for more than its name": "def f(x):\n    return x.__class__.__mro__\n",
    "__class__ assigned": "def f(x):\n    x.__class__ = int\n",
    "__class__ assigned by setattr's literal name": "setattr(torch, '__class__', type(torch))\n",
    "__repr__ replaced by setattr, __str__ deleted": "setattr(torch.Tensor, '__repr__', len)\ndelattr(T, '__str__')\n",
    "a str's class, then its bases": "def f(x):\n    return x.__class__.__name__.__class__.__base__\n",
    "locals() at module level (the module's globals)": 'x = 1\ns = "{x}".format(**locals())\n',
    "locals passed uncalled (read by whichever frame calls it)": "def f(g):\n    return g(locals)\n",
    # what a scope evaluates where it stands is module-level there: the module's globals, and __name__ among them
    "locals() as a default": 'def mark(d=locals()):\n    d["x"] = 1\n',
    "locals() as a lambda's default": "y = (lambda d=locals(): d)()\n",
    "locals() as a comprehension's first iterable": "z = [d for d in [locals()]][0]\n",
    "locals() as a class keyword": "class C(B, ns=locals()):\n    pass\n",
    "locals() in a decorator": "@keep(locals())\ndef f():\n    pass\n",
    "locals() in a return annotation": "def f() -> locals().update({}):\n    pass\n",
    "vars() as a keyword-only default": "def f(*, d=vars()):\n    pass\n",
    "globals() in a function": "def f():\n    return globals()\n",
    "vars bound at module level": "vars = 1\nx = vars(torch)\n",
    "vars read before a module-level binding": "x = vars(torch)\nvars = 1\n",
    "vars declared global": "def f():\n    global vars\n    return vars(torch)\n",
    "vars as a default": "def f(vars=vars):\n    return vars(torch)\n",
    "vars as a comprehension's iterable": "def f():\n    return [vars(torch) for vars in [vars]]\n",
    "vars of a class body": "class K:\n    vars = vars\n    def f(self):\n        return vars(torch)\n",
    "vars in a nested function that binds none": "def f():\n    def g():\n        return vars(torch)\n    return g\n",
    "a lambda's vars given the builtin": "y = (lambda vars: vars(torch))(vars)\n",
}


@pytest.mark.parametrize("text", OWN_NAMES_STAY_OWN.values(), ids=OWN_NAMES_STAY_OWN)
def test_scan_leaves_a_files_own_names_alone(text):
    assert scan("ex1", text) == ()


@pytest.mark.parametrize("text", LOOKALIKES_STAY_FLAGGED.values(), ids=LOOKALIKES_STAY_FLAGGED)
def test_scan_still_flags_what_only_looks_like_an_own_name(text):
    assert scan("ex1", text), text


SIGNATURES = (
    "a, b",
    "a, b=1",
    "a, b=1, /, c=2, *args, k, m=3, **kw",
    "*, k=1",
    "*args",
    "**kw",
    "a, /, b",
    "a, b=2, *, c, d=4",
    "",
    "a=1, /",
    "*args, **kw",
)


@pytest.mark.parametrize("params", SIGNATURES)
def test_a_plain_functions_parameters_are_read_as_inspect_reads_them(params):
    """The child reads a plain function's parameters from its code object; it must agree with inspect.signature."""
    from grader.sandbox import child

    namespace: dict = {}
    exec(f"def f({params}):\n    pass\n", namespace)
    fn = namespace["f"]
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    expected = [
        (p.name, p.kind if p.kind in kinds else None, p.default is not p.empty)
        for p in inspect.signature(fn).parameters.values()
    ]
    assert child._plain_parameters(fn) == expected
    fn.__defaults__ = (1, 2, 3, 4)  # more defaults than parameters: the child asks inspect, as before
    params = inspect.signature(fn).parameters.values()
    expected = [{"name": p.name, "default": p.default is not p.empty} for p in params if p.kind not in kinds]
    assert child._signature(fn)["params"] == expected


def test_a_signature_that_raises_is_reported_not_a_crash():
    """A student's own defaults table or __signature__ that raises: that function "cannot be read", the file loads."""
    from grader.sandbox import child

    class Table(dict):
        def __contains__(self, key):
            raise RuntimeError("kwdefaults boom")

        def get(self, key, default=None):
            raise RuntimeError("kwdefaults boom")

    def dlogits(logits, Yb, n, *, extra=1):
        return logits

    dlogits.__kwdefaults__ = Table(extra=1)

    class Signed:
        @property
        def __signature__(self):
            raise SystemExit("signature boom")

        def __call__(self, dhpreact):
            return dhpreact

    for fn in (dlogits, Signed()):
        assert child._signature(fn) == {"params": [], "error": child.UNREADABLE_SIGNATURE}
