"""Similarity: cheap evasions are undone, base code is no evidence, one-liners do not count, shared lines are marked."""

from __future__ import annotations

import ast
import copy
import html

import pytest

from grader.classroom.reports import similarity
from grader.classroom.reports.html import _similarity
from grader.spec import policy
from grader.spec.policy import PolicyError
from grader.submissions.notebook import notebook_sources
from tests.independent import copied_and_renamed, student_files
from tests.notebooks.lecture import SETUP, lecture_cells, write


def _exercises(files: dict[str, str]) -> dict[str, str]:
    return {name.removesuffix(".py"): text for name, text in files.items()}


def _class(extra: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Return the 20 independent students' sources, with extra students ({id: {'ex1.py': text}}) added."""
    sources = {f"indep{k:02d}": _exercises(student_files(k)) for k in range(20)}
    sources.update({s: _exercises(files) for s, files in extra.items()})
    return sources


def _defs(text: str) -> list[ast.FunctionDef]:
    return [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]


def under_if_true(files: dict[str, str]) -> dict[str, str]:
    """Return the files verbatim, but with every function indented under `if True:`."""
    out = {}
    for name, text in files.items():
        lines = text.splitlines(keepends=True)
        for fn in reversed(_defs(text)):
            first = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1
            block = ["    " + line if line.strip() else line for line in lines[first : fn.end_lineno]]
            lines[first : fn.end_lineno] = ["if True:\n", *block]
        out[name] = "".join(lines)
    return out


def bodies_wrapped(files: dict[str, str]) -> dict[str, str]:
    """Return the files verbatim, but with every body nested in `if 1:`, `while True: ...; break`, a nullcontext
    and a `try: ... except Exception: raise`."""
    out = {}
    for name, text in files.items():
        lines = text.splitlines(keepends=True)
        for fn in reversed(_defs(text)):
            start = fn.body[0].lineno - 1
            body = [" " * 16 + line if line.strip() else line for line in lines[start : fn.end_lineno]]
            wrapped = [
                "    if 1:\n",
                "        while True:\n",
                "            with contextlib.nullcontext():\n",
                "                try:\n",
                *body,
                "                except Exception:\n",
                "                    raise\n",
                "            break\n",
            ]
            lines[start : fn.end_lineno] = wrapped
        out[name] = "import contextlib\n" + "".join(lines)
    return out


def into_helpers(files: dict[str, str]) -> dict[str, str]:
    """Return the files with every function's body moved into a renamed helper that the function calls once."""
    out = {}
    for name, text in files.items():
        tree = ast.parse(text)
        body = []
        for k, node in enumerate(tree.body):
            if isinstance(node, ast.FunctionDef):
                helper = copy.copy(node)
                helper.name = f"_part{k}_{node.name[::-1]}"
                helper.body = node.body
                call = ast.Call(
                    ast.Name(helper.name, ast.Load()), [ast.Name(a.arg, ast.Load()) for a in node.args.args], []
                )
                node.body = [ast.Return(call)]
                body += [helper, node]
            else:
                body.append(node)
        tree.body = body
        out[name] = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    return out


def test_wrappers_and_helpers_normalise_to_the_plain_function():
    plain = "def dh(W2, dlogits):\n    d = dlogits @ W2.T\n    d = d * 1.0\n    return d\n"
    wrapped = (
        "import contextlib\nif True:\n    def dh(W2, dlogits):\n        '''Docstring.'''\n        if not False:\n"
        "            while 1:\n                with contextlib.nullcontext():\n                    try:\n"
        "                        d = dlogits @ W2.T\n                        pass\n                    except:\n"
        "                        raise\n                    finally:\n                        pass\n"
        "                break\n        d = d * 1.0\n        return d\n"
    )
    helper = (
        "def _mine(a, b):\n    d = b @ a.T\n    d = d * 1.0\n    return d\n\n\n"
        "def dh(W2, dlogits):\n    return _mine(W2, dlogits)\n"
    )
    filtered = {
        label: {k: similarity._fingerprint(v).filtered_code for k, v in similarity.functions("ex1", text).items()}
        for label, text in (("plain", plain), ("wrapped", wrapped), ("helper", helper))
    }
    assert filtered["plain"] == filtered["wrapped"] == filtered["helper"] != {}


def test_only_a_helper_called_once_from_a_graded_function_is_inlined():
    twice = "def _h(x):\n    return x * 2.0 + 1.0\n\ndef dh(W2, dlogits):\n    return _h(dlogits) @ _h(W2).T\n"
    outside = "def _h(x):\n    return x * 2.0 + 1.0\n\ndef not_graded(y):\n    return _h(y)\n"
    chain = (
        "def _a(x):\n    return _b(x) + 1\n\ndef _b(x):\n    return x * 2\n\n"
        "def dh(W2, dlogits):\n    return _a(dlogits)\n"
    )
    assert set(similarity.functions("ex1", twice)) == {"ex1._h", "ex1.dh"}
    assert set(similarity.functions("ex1", outside)) == {"ex1._h", "ex1.not_graded"}
    inlined = similarity.functions("ex1", chain)
    assert set(inlined) == {"ex1.dh"} and "_a" not in inlined["ex1.dh"] and "_b" not in inlined["ex1.dh"]


@pytest.mark.parametrize("evade", [under_if_true, bodies_wrapped, into_helpers], ids=lambda f: f.__name__)
def test_an_evasive_copy_is_flagged_and_no_independent_pair_is(evade):
    original = student_files(3)
    evasive = evade(original)
    assert all(evasive[f] != original[f] for f in original)
    result = similarity.compare_class(_class({"evader": evasive}))
    assert [(p.a, p.b) for p in result.pairs] == [("evader", "indep03")]
    assert result.pairs[0].score >= 0.95, result.pairs[0].score


def test_a_renamed_copy_moved_into_helpers_and_wrapped_is_still_flagged():
    evasive = bodies_wrapped(into_helpers(copied_and_renamed(student_files(3))))
    result = similarity.compare_class(_class({"evader": evasive}))
    assert [(p.a, p.b) for p in result.pairs] == [("evader", "indep03")]


# a lecture-notebook student's own versions of four gradients (loops where the lecture has one line)
OWN = {
    "dbngain": "def dbngain(bnraw, dhpreact):\n    total = torch.zeros(1, bnraw.shape[1])\n"
    "    for row in range(bnraw.shape[0]):\n        total += bnraw[row] * dhpreact[row]\n    return total\n",
    "dbnvar_inv": "def dbnvar_inv(bndiff, dbnraw):\n    acc = torch.zeros(1, bndiff.shape[1])\n"
    "    for r in range(bndiff.shape[0]):\n        acc = acc + bndiff[r:r + 1] * dbnraw[r:r + 1]\n    return acc\n",
    "dcounts_sum_inv": "def dcounts_sum_inv(counts, dprobs):\n    out = torch.empty(counts.shape[0], 1)\n"
    "    for i in range(counts.shape[0]):\n        out[i, 0] = torch.dot(counts[i], dprobs[i])\n    return out\n",
    "dbndiff2": "def dbndiff2(bndiff2, dbnvar):\n    rows, cols = bndiff2.shape\n    scale = 1.0 / (rows - 1)\n"
    "    return scale * dbnvar.repeat(rows, 1).reshape(rows, cols)\n",
}


def _replace(text: str, name: str, new: str) -> str:
    fn = next(n for n in _defs(text) if n.name == name)
    lines = text.splitlines(keepends=True)
    return "".join(lines[: fn.lineno - 1]) + new + "".join(lines[fn.end_lineno :])


@pytest.fixture(scope="module")
def lecture_class(tmp_path_factory):
    """Write the lecture's notebook; return it and a class where six students started from its code.

    lecture1-4 kept the lecture's code (and its cmp and build_dataset); lecture0 wrote four gradients its own
    way; lecture5 is lecture0 with every local renamed and the functions reordered.
    """
    folder = tmp_path_factory.mktemp("lecture")
    lecture = write(folder / "lecture_solution.ipynb", lecture_cells())
    converted, _ = notebook_sources(lecture)
    helpers = "\n\n".join(
        t[t.index("def ") :].replace("\n\nXtr, Ytr = build_dataset(words)", "") for _, t in SETUP if "def " in t
    )
    extra = {}
    for k in range(5):
        files = {f"{ex}.py": src.text for ex, src in converted.items()}
        if k == 0:
            for name, own in OWN.items():
                files["ex1.py"] = _replace(files["ex1.py"], name, own)
        files["ex1.py"] = f"# exercise 1, from the lecture's notebook (student {k})\n{files['ex1.py']}\n\n{helpers}\n"
        extra[f"lecture{k}"] = files
    extra["lecture5"] = copied_and_renamed(extra["lecture0"])
    return lecture, _class(extra)


def test_students_who_started_from_the_lecture_form_a_group(lecture_class):
    _, sources = lecture_class
    result = similarity.compare_class(sources)
    assert similarity.groups(result.pairs) == [[f"lecture{k}" for k in range(6)]]


def test_once_the_base_names_the_lecture_only_the_copy_is_flagged(lecture_class):
    lecture, sources = lecture_class
    (lecture.parent / "course.toml").write_text('[similarity]\nbase = ["lecture_solution.ipynb"]\n')
    base = policy.load(lecture.parent / "course.toml").similarity_base
    result = similarity.compare_class(sources, base=base)
    assert [(p.a, p.b) for p in result.pairs] == [("lecture0", "lecture5")]
    assert result.settings["base"] == ["lecture_solution.ipynb"]
    assert "the course's base code (lecture_solution.ipynb)" in _similarity({"similarity": result.to_dict()}, {})


def test_a_python_base_file_is_read_too(tmp_path):
    shared = "def dC(C, Xb, demb):\n    g = torch.zeros_like(C)\n" + "".join(
        f"    g[Xb[{i}, 0]] += demb[{i}, 0] * {i + 1}.5\n" for i in range(8)
    )
    sources = {s: {"ex1": shared + f"\n\ndef dh(W2, dlogits):\n    return dlogits @ W2.T  # {s}\n"} for s in "ab"}
    assert similarity.compare_class(sources).max_score == 1.0
    (tmp_path / "given.py").write_text(shared)
    assert similarity.compare_class(sources, base=[tmp_path / "given.py"]).max_score == 0.0


def test_the_similarity_table_of_course_toml(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "given.py").write_text("x = 1\n")
    (tmp_path / "course.toml").write_text('[similarity]\nbase = ["notes/given.py"]\n')
    p = policy.load(tmp_path / "course.toml")
    assert p.similarity_base == (str((tmp_path / "notes" / "given.py").resolve()),)
    assert "similarity" not in p.to_toml() and p.fingerprint() == policy.Policy().fingerprint()
    for text, says in (
        ('[similarity]\nbase = ["nowhere.py"]\n', "not a file"),
        ('[similarity]\nbase = "given.py"\n', "not a list of file paths"),
        ("[similarity]\nbases = []\n", "unknown key 'similarity.bases'"),
        ('similarity = "x"\n', "must be a table"),
    ):
        (tmp_path / "course.toml").write_text(text)
        with pytest.raises(PolicyError, match=says):
            policy.load(tmp_path / "course.toml")


def test_a_one_line_function_never_counts_as_a_whole_copy(monkeypatch):
    one = {"ex1": "def dhpreact(h, dh):\n    return (1.0 - h**2) * dh\n"}
    assert similarity.compare_class({"a": one, "b": one}).max_score == 0.0
    monkeypatch.setattr(similarity, "MIN_FUNCTION", 0)
    assert similarity.compare_class({"a": one, "b": one}).max_score == 1.0


def test_a_one_liner_inside_a_long_version_counts_at_the_long_ones_size():
    short = {"ex1": "def dhpreact(h, dh):\n    return (1.0 - h**2) * dh\n"}
    long = {"ex1": "def dhpreact(h, dh):\n    return (1.0 - h**2) * dh if h.dim() == 2 else torch.zeros_like(h) + dh\n"}
    result = similarity.compare_class({"a": short, "b": long})
    assert result.max_score == round(28 / 50, 4)  # the 28 characters of the one-liner, over the long version's 50


def test_the_report_marks_the_lines_a_pair_shares():
    original = student_files(3)
    copy_ = copied_and_renamed(original)
    unique = "    my_check = torch.arange(7) < 99  # mine"
    text = copy_["ex1.py"]
    at = text.index("\n", text.index("def dC(")) + 1
    copy_["ex1.py"] = text[:at] + unique + "\n" + text[at:]
    result = similarity.compare_class(_class({"copier": copy_}))
    (pair,) = result.pairs
    dc = next(f for f in pair.functions if f.function == "ex1.dC")
    lines = dc.code_a.splitlines()
    assert unique in lines and lines.index(unique) + 1 not in dc.lines_a
    assert dc.lines_a and dc.lines_b and lines[0].startswith("def dC(")
    assert all(lines[i - 1].strip() for i in dc.lines_a)  # a shared line holds code
    page = _similarity({"similarity": result.to_dict()}, {})
    marked = lines[dc.lines_a[-1] - 1]
    assert f'<mark class="shared">{html.escape(marked)}</mark>' in page
    assert html.escape(unique) in page and f'<mark class="shared">{html.escape(unique)}' not in page
    b_lines = dc.code_b.splitlines()
    assert all(f'<mark class="shared">{html.escape(b_lines[i - 1])}</mark>' in page for i in dc.lines_b)
