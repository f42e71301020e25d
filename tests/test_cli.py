"""The `grade` command end to end: CliRunner for speed, a real subprocess for the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from grader import catalogue
from grader.cli import main
from tests.conftest import CORPUS, EXERCISES, NAMES_TXT, REFERENCE, ROOT, make_submission, with_snippet

ITEM_KEYS = {
    "id",
    "exercise",
    "name",
    "status",
    "exact",
    "approx",
    "maxdiff",
    "shape",
    "expected_shape",
    "traps",
    "message",
    "score",
    "max_score",
}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_reference_passes_every_item(reference_result):
    assert [i.status for i in reference_result.items] == ["passed"] * len(catalogue.items())
    assert all(i.traps == [] for i in reference_result.items)
    assert reference_result.score == reference_result.max_score == 42


def test_stubs_are_not_attempted():
    result = run("all", "--submission", EXERCISES, "--json")
    assert result.exit_code == 1
    counts = {}
    for item in json.loads(result.output)["items"]:
        counts.setdefault(item["exercise"], []).append(item["status"])
    assert {ex: (len(s), set(s)) for ex, s in counts.items()} == {
        "ex1": (26, {"not_attempted"}),
        "ex2": (1, {"not_attempted"}),
        "ex3": (1, {"not_attempted"}),
        "ex4": (8, {"not_attempted"}),
    }


def test_json_schema_and_order():
    result = run("all", "--submission", REFERENCE, "--json")
    assert result.exit_code == 0
    obj = json.loads(result.output)  # one object, nothing else on stdout
    assert set(obj) == {"submission", "score", "max_score", "items"}
    assert [i["id"] for i in obj["items"]] == [i.id for i in catalogue.items()]
    assert obj["items"][-1]["id"] == "ex4.training" and obj["items"][0]["id"] == "ex1.dlogprobs"
    for item in obj["items"]:
        assert set(item) == ITEM_KEYS
        assert isinstance(item["exact"], bool) and isinstance(item["approx"], bool)
        assert isinstance(item["maxdiff"], float) and isinstance(item["traps"], list)
        assert item["score"] == item["max_score"] > 0
    dc = next(i for i in obj["items"] if i["id"] == "ex1.dC")
    assert dc["shape"] == dc["expected_shape"] == [27, 10]


def test_table_names_the_trap_and_the_rows(tmp_path):
    sub = with_snippet(tmp_path, "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    result = run("ex1", "--submission", sub, "--only", "dC", "--hints")
    assert result.exit_code == 1
    assert "ex1.dC" in result.output and "FAILED" in result.output and "dC-repeated-rows" in result.output
    assert "looked up" in result.output and "index_add_" in result.output
    assert "why:" in result.output  # --hints
    assert "score 0/1" in result.output


def test_lecture_dbnmeani_fails_only_on_shape(tmp_path):
    lecture = "def dbnmeani(dbndiff):\n    return (-dbndiff).sum(0)\n"
    result = run("ex1", "--submission", with_snippet(tmp_path, "ex1", lecture), "--json")
    items = {i["id"]: i for i in json.loads(result.output)["items"]}
    item = items["ex1.dbnmeani"]
    assert (item["status"], item["traps"], item["shape"]) == ("failed", ["shape-mismatch"], [64])
    assert "match after broadcasting" in item["message"] and "keepdim=True" in item["message"]
    assert all(i["status"] == "passed" for k, i in items.items() if k != "ex1.dbnmeani")


def test_only_and_bad_arguments():
    assert run("ex1", "--submission", REFERENCE, "--only", "dC", "--only", "dW1").exit_code == 0
    bad = CliRunner().invoke(main, ["ex1", "--only", "dnope"])
    assert bad.exit_code == 2 and "dnope is not an item of ex1" in bad.output
    missing = CliRunner().invoke(main, ["ex1", "--submission", "/no/such/folder"])
    assert missing.exit_code == 2 and "is not a folder" in missing.output


def test_unknown_and_future_parameters_are_clear_errors(tmp_path):
    snippet = "def dprobs(probs, dcounts):\n    return probs\n\n\ndef dh(hidden):\n    return hidden\n"
    items = {
        i["id"]: i
        for i in json.loads(run("ex1", "-s", with_snippet(tmp_path, "ex1", snippet), "--json").output)["items"]
    }
    assert items["ex1.dprobs"]["status"] == "error" and "later in backprop order" in items["ex1.dprobs"]["message"]
    assert items["ex1.dh"]["status"] == "error" and "Ask for any of:" in items["ex1.dh"]["message"]
    assert "dlogits" in items["ex1.dh"]["message"]


def test_missing_file_and_missing_function(tmp_path):
    sub = make_submission(tmp_path, {"ex2.py": "import torch\n"}, base=None)
    obj = json.loads(run("all", "-s", sub, "--json").output)
    by = {i["id"]: i for i in obj["items"]}
    assert by["ex1.dC"]["status"] == "not_attempted" and "No ex1.py" in by["ex1.dC"]["message"]
    assert by["ex2.dlogits"]["status"] == "not_attempted" and "no function `dlogits`" in by["ex2.dlogits"]["message"]


@pytest.mark.skipif(not NAMES_TXT.exists(), reason="the lecture's names.txt is not on this machine")
def test_data_option_regrades_on_the_lecture_names():
    result = run("ex2", "--submission", REFERENCE, "--data", NAMES_TXT, "--json")
    assert result.exit_code == 0 and json.loads(result.output)["score"] == 2


def test_real_subprocess_entry_points():
    for cmd in ([sys.executable, "-m", "grader"], ["grade"]):
        proc = subprocess.run(
            [*cmd, "ex3", "--submission", str(REFERENCE), "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["items"][0]["id"] == "ex3.dhprebn"
    stubs = subprocess.run(["grade", "ex1"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert stubs.returncode == 1 and "score 0/26: 26 not attempted" in stubs.stdout


def test_full_training_runs_in_the_sandbox():
    result = run("ex4", "--submission", REFERENCE, "--full", "--steps", "300", "--json")
    assert result.exit_code == 0
    training = json.loads(result.output)["training"]
    assert training["steps"] == 300 and 2.0 < training["val_loss"] < 3.3 and len(training["samples"]) == 20


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    sub = with_snippet(tmp_path / "sub", "ex1", (CORPUS / "ex1" / "dC_fancy_index_add.py").read_text())
    png = tmp_path / "dc.png"
    assert run("ex1", "-s", sub, "--only", "dC", "--plot", png).exit_code == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png2 = tmp_path / "dlogits.png"
    assert run("ex2", "-s", REFERENCE, "--plot", png2).exit_code == 0
    assert png2.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
