"""Every speed-up keeps the verdicts: `grade batch` on the golden class writes what the golden text says.

tests/golden/batch/ holds, as normalised text (see tests/golden.py), every output file `grade batch` writes for the
golden class but report.html. The class is run twice, once with the kernels this CPU picks and once with
ATEN_CPU_CAPABILITY=default (torch's generic, unvectorised kernels), and both runs must match the same text:
statuses, verdicts, traps, messages, shapes, scores and all other non-numeric text exactly, floats up to float32
rounding noise (|now - golden| <= 1e-6 + 1e-3 * |golden|). A change that means to alter the outputs regenerates the
text, reviews its diff and says why in its commit:

    python -m tests.golden update        build the class, run `grade batch`, rewrite tests/golden/batch/
    git diff tests/golden/batch

(`python -m tests.golden build DIR` writes just the class, to run `grade batch` on by hand.)
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys

import pytest

from tests import golden

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="grade batch needs Linux")

GENERIC = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}


def _grade_the_class(tmp_path_factory, env: dict | None) -> dict[str, str]:
    root = tmp_path_factory.mktemp("golden")
    subs = golden.build(root)
    proc = golden.run(subs, root / "out", root / "course.toml", env=env)
    assert proc.returncode in (0, 1), f"grade batch exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
    return golden.normalise(root / "out")


def _check(outputs: dict[str, str], how: str) -> None:
    __tracebackhide__ = True
    want = golden.load()
    assert want, f"no golden text in {golden.GOLDEN}: run `python -m tests.golden update`"
    gone, added = sorted(set(want) - set(outputs)), sorted(set(outputs) - set(want))
    assert not gone and not added, f"{how}: output files gone {gone[:10]}, added {added[:10]}"
    changed = {}
    for name in sorted(want):
        problems, snapped = golden.compare_file(name, outputs[name], want[name])
        if problems:
            changed[name] = (problems, snapped)
    if changed:
        first = next(iter(changed))
        problems, snapped = changed[first]
        diff = difflib.unified_diff(
            want[first].splitlines(), snapped.splitlines(), f"golden/{first}", f"now/{first}", lineterm="", n=3
        )
        shown = "\n".join(list(diff)[:80])
        pytest.fail(
            f"{how}: {len(changed)} output file(s) differ beyond float32 rounding noise, "
            f"e.g. {', '.join(list(changed)[:5])}\n"
            f"{first}:\n  " + "\n  ".join(problems[:10]) + f"\n{shown}\n"
            "If the change is meant: python -m tests.golden update, review `git diff tests/golden/batch`, "
            "and say why in the commit."
        )


def test_the_golden_class_is_not_trivial():
    want = golden.load()
    summary = json.loads(want["summary.json"])
    assert summary["students"] == len([k for k in want if k.startswith("students/")]) == 120
    assert len(summary["traps"]) >= 15, "the golden class should set off most traps"
    assert "hostile_infinite_loop" in summary["timed_out"]
    assert 0 < summary["score"]["mean"] < summary["max_score"]
    assert {"gradebook.csv", "canvas.csv", "manifest.json"} <= set(want)


def test_grade_batch_writes_the_golden_outputs(tmp_path_factory):
    _check(_grade_the_class(tmp_path_factory, None), "with this CPU's kernels")


@pytest.mark.slow
def test_grade_batch_writes_the_golden_outputs_with_generic_kernels(tmp_path_factory):
    """The same text with torch's generic kernels: what another CPU would compute, up to rounding."""
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    capability = subprocess.run([sys.executable, "-c", probe], env=GENERIC, capture_output=True, text=True)
    assert capability.stdout.strip() == "DEFAULT", f"ATEN_CPU_CAPABILITY=default was not obeyed: {capability}"
    _check(_grade_the_class(tmp_path_factory, GENERIC), "with ATEN_CPU_CAPABILITY=default")
