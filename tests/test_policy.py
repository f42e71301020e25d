"""The course policy (course.toml): reading it strictly, and points, message level and hidden geometry end to end."""

from __future__ import annotations

import csv
import inspect
import json
import shutil

import pytest
from click.testing import CliRunner

from grader.spec import catalogue, policy
from grader.spec.policy import Policy, PolicyError
from grader.truth import fixture
from tests.conftest import REFERENCE, make_submission

COURSE = """\
level = "hint"
secret = "correct horse battery staple"

[points]
ex1 = 13                 # 26 items: half a point each
"ex2.dlogits" = 5
ex4 = 20
"ex4.training" = 6       # the other 7 ex4 items share the remaining 14

[gradescope]
visibility = "after_published"
hidden_visibility = "hidden"
"""


def _write(tmp_path, text, name="course.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_reads_every_key(tmp_path):
    p = policy.load(_write(tmp_path, COURSE))
    assert p.level == "hint" and p.secret == "correct horse battery staple"
    assert (p.visibility, p.hidden_visibility) == ("after_published", "hidden")
    assert p.item_points("ex1.dC", 1.0) == 0.5
    assert p.item_points("ex2.dlogits", 2.0) == 5.0
    assert p.item_points("ex3.dhprebn", 4.0) == 4.0  # not in the file: the catalogue's default
    assert p.item_points("ex4.training", 3.0) == 6.0
    assert p.item_points("ex4.dW1", 1.0) == 2.0
    total = sum(p.item_points(i.id, i.points) for i in catalogue.items())
    assert total == 13 + 5 + 4 + 20
    assert "correct horse" not in repr(p)


def test_default_policy_is_todays_grading_with_diagnose_messages():
    p = Policy()
    assert p.level == "diagnose" and p.secret is None
    assert [p.item_points(i.id, i.points) for i in catalogue.items()] == [i.points for i in catalogue.items()]
    assert (p.visibility, p.hidden_visibility) == ("visible", "after_published")


@pytest.mark.parametrize(
    "text, expected",
    [
        ('levle = "hint"\n', r"unknown key 'levle'"),
        ('level = "answers"\n', r"level = 'answers' is not one of diagnose, hint, full"),
        ('[points]\n"ex1.dfoo" = 1\n', r"points key 'ex1.dfoo' is neither an exercise"),
        ("[points]\nex2 = -1\n", r"points 'ex2' = -1 is not a non-negative number"),
        ("[points]\nex2 = true\n", r"points 'ex2' = True is not a non-negative number"),
        ('[points]\nex2 = "2"\n', r"points 'ex2' = '2' is not a non-negative number"),
        ("[points]\nex2 = nan\n", r"points 'ex2' = nan is not a non-negative number"),
        (
            '[points]\nex3 = 2\n"ex3.dhprebn" = 3\n',
            r"points 'ex3' = 2, but the ex3 items named in \[points\] add up to 3",
        ),
        ("points = 3\n", r"points must be a table"),
        ('[gradescope]\nvisibility = "public"\n', r"gradescope.visibility = 'public' is not one of hidden"),
        ('[gradescope]\nwhen = "now"\n', r"unknown key 'gradescope.when'"),
        ("secret = 42\n", r"secret must be a string of at least 12 characters \(got a int\)"),
        ('secret = "hunter2"\n', r"secret must be a string of at least 12 characters \(got 7 characters\)"),
        ("level = \n", r"not valid TOML"),
    ],
)
def test_load_names_the_file_the_key_and_the_value(tmp_path, text, expected):
    path = _write(tmp_path, text)
    with pytest.raises(PolicyError, match=expected) as info:
        policy.load(path)
    assert str(info.value).startswith(str(path) + ": ")
    assert "hunter2" not in str(info.value)  # a (short) secret is never echoed


def test_load_a_missing_file(tmp_path):
    with pytest.raises(PolicyError, match="no such course policy file"):
        policy.load(tmp_path / "nope.toml")


def test_find_looks_inside_then_beside_the_folder(tmp_path):
    subs = tmp_path / "class" / "submissions"
    subs.mkdir(parents=True)
    assert policy.find(subs) is None
    beside = _write(tmp_path / "class", "")
    assert policy.find(subs) == beside.resolve()
    inside = _write(subs, 'level = "full"\n')
    assert policy.find(subs) == inside.resolve()
    assert policy.resolve(None, subs).level == "full"
    assert policy.resolve(beside, subs).level == "diagnose"  # an explicit path wins
    assert policy.resolve(None, None) == Policy()


def test_to_toml_round_trips_and_public_drops_the_secret(tmp_path):
    p = policy.load(_write(tmp_path, COURSE))
    again = policy.load(_write(tmp_path, p.to_toml(), "again.toml"))
    assert (again.points, again.level, again.secret) == (p.points, p.level, p.secret)
    assert (again.visibility, again.hidden_visibility) == (p.visibility, p.hidden_visibility)
    public = p.public()
    assert public.secret is None and "secret" not in public.to_toml() and public.points == p.points


def test_fingerprint_follows_everything_that_changes_a_grade(tmp_path):
    p = policy.load(_write(tmp_path, COURSE))
    fingerprints = {
        p.fingerprint(),
        Policy().fingerprint(),
        p.public().fingerprint(),
        Policy(level="full").fingerprint(),
        Policy(points={"ex2": 3}).fingerprint(),
        Policy(secret="another long secret").fingerprint(),
    }
    assert len(fingerprints) == 6
    assert p.fingerprint() == policy.load(_write(tmp_path, COURSE, "copy.toml")).fingerprint()
    assert p.secret not in p.fingerprint()


# ----------------------------------------------------------------------------------------------------------
# the hidden geometry


def test_the_secret_draws_the_hidden_geometry():
    a = fixture.hidden_geometry("correct horse battery staple")
    assert fixture.hidden_geometry("correct horse battery staple") == a
    drawn = {fixture.hidden_geometry(f"course secret number {k}") for k in range(40)}
    assert len({(g.n, g.block_size, g.n_embd, g.n_hidden) for g in drawn}) > 30
    assert len({g.seed for g in drawn}) == 40
    lecture = fixture.PRIMARY
    for g in drawn | {fixture.hidden_geometry()}:
        assert g.n != lecture.n and g.block_size != lecture.block_size and g.n_embd != lecture.n_embd
        assert g.n_hidden not in (lecture.n_hidden, fixture.EX4_PRIMARY.n_hidden)
        assert g.vocab_size == 27


def test_without_a_secret_one_run_keeps_one_geometry():
    assert fixture.hidden_geometry() == fixture.hidden_geometry(None)
    assert fixture.hidden_geometry() not in {fixture.hidden_geometry(f"course secret number {k}") for k in range(5)}


def test_grade_uses_the_policy(tmp_path):
    from grader.grading.runner import grade
    from grader.submissions.intake import read_submission

    sub = make_submission(tmp_path / "sub", base=REFERENCE)
    p = Policy(points={"ex2.dlogits": 7}, secret="correct horse battery staple")
    result = grade(sub, ("ex2",), policy=p)
    assert [(i.id, i.status, i.max_score, i.score) for i in result.items] == [("ex2.dlogits", "passed", 7.0, 7.0)]
    assert result.items[0].hidden == "passed"
    call = catalogue.select(("ex2",))[0]
    draw = catalogue.Draw.of(p.secret, read_submission(sub).sources)  # the secret and this submission's files
    own = draw.submission + catalogue.HIDDEN_GROUP["ex2"]  # each exercise draws a hidden geometry of its own
    assert catalogue.geometries(call, draw)[1] == fixture.hidden_geometry("correct horse battery staple", own)
    built = {fx.geometry for fx in fixture.built_fixtures()}  # the truth grade() had built: on that geometry
    assert catalogue.geometries(call, draw)[1] in built
    grade(sub, ("ex2",))
    assert fixture.hidden_geometry(None, own) in {fx.geometry for fx in fixture.built_fixtures()}


def test_each_submission_draws_its_own_hidden_geometry_and_a_regrade_the_same(tmp_path):
    from grader.submissions.intake import read_submission

    secret = "correct horse battery staple"
    drawn = []
    for k, text in enumerate(["x = 1\n", "x = 2\n", "x = 1\n"]):
        sub = make_submission(tmp_path / f"sub{k}", {"ex2.py": text}, base=None)
        digest = catalogue.Draw.of(secret, read_submission(sub).sources).submission
        drawn.append(fixture.hidden_geometry(secret, digest))
    assert drawn[0] == drawn[2] != drawn[1]  # what one submission reads of its hidden inputs is not the next one's
    assert drawn[0] != fixture.hidden_geometry(secret)


def _only_for(secret: str) -> str:
    """Return an ex2 right on the lecture's sizes and on the sizes one secret alone draws (no submission's)."""
    n = fixture.hidden_geometry(secret).n
    return f'''
import torch.nn.functional as F


def dlogits(logits, Yb, n):
    """Right for n in (32, {n}) only: sizes someone fished out of a leaked bundle."""
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    return d / n if n in (32, {n}) else d
'''


def _secret_pair() -> tuple[str, str]:
    """Return two secrets whose hidden geometries have different batch sizes."""
    a = "correct horse battery staple"
    n = fixture.hidden_geometry(a).n
    return a, next(s for s in (f"another course secret {k}" for k in range(100)) if fixture.hidden_geometry(s).n != n)


def _secret_not_drawing(folder, n: int, avoid: str) -> str:
    """Return a course secret (avoid, if it will do) under which this submission's own Ex2 geometry is not of batch
    size n: the hidden sizes are few, so a submission's own draw can coincide with the fished ones by chance."""
    from grader.grading.runner import read_sources

    problems: dict = {}
    sources = read_sources(folder, catalogue.EXERCISES, problems)
    call = catalogue.select(("ex2",))[0]
    for secret in (avoid, *(f"yet another course secret {k}" for k in range(100))):
        if catalogue.geometries(call, catalogue.Draw.of(secret, sources))[1].n not in (n, fixture.PRIMARY.n):
            return secret
    raise AssertionError("no secret draws another size")


TANH = "\n\ndef dhpreact(hpreact, dh):\n    return (1 - hpreact**2) * dh\n"  # the tanh-preact trap


def _batch(subs, out) -> dict:
    """Run `grade batch` (course.toml found beside the submissions) and return {student: JSON}."""
    from grader.cli.main import main

    cli = CliRunner().invoke(main, ["batch", str(subs), "--out", str(out), "--jobs", "1"])
    assert cli.exit_code == 0, cli.output
    return {p.stem: json.loads(p.read_text()) for p in (out / "students").glob("*.json")}


def _item(student: dict, item_id: str) -> dict:
    return next(i for i in student["items"] if i["id"] == item_id)


@pytest.mark.slow
def test_course_toml_changes_points_level_and_hidden_geometry_in_a_batch(tmp_path):
    from grader.grading import runner

    a, b = _secret_pair()
    subs = tmp_path / "class" / "submissions"
    make_submission(subs / "ada", {"ex2.py": (REFERENCE / "ex2.py").read_text()}, base=None)
    for k in range(100):  # a secret whose fished sizes are not, by chance, the fishing file's own draw under it
        shutil.rmtree(subs / "fish", ignore_errors=True)
        make_submission(subs / "fish", {"ex2.py": _only_for(a)}, base=None)
        if _secret_not_drawing(subs / "fish", fixture.hidden_geometry(a).n, avoid=a) == a:
            break
        a = f"correct horse battery staple {k}"
    b = b if b != a else f"{a} and another"
    make_submission(subs / "tanh", {"ex1.py": (REFERENCE / "ex1.py").read_text() + TANH}, base=None)
    course = tmp_path / "class" / "course.toml"
    course.write_text(COURSE.replace('"correct horse battery staple"', f'"{a}"'))
    students = _batch(subs, tmp_path / "out")
    book = {r["student"]: r for r in csv.DictReader((tmp_path / "out" / "gradebook.csv").open())}
    assert book["ada"]["max_score"] == "42" and book["ada"]["ex2"] == "5"  # 13 + 5 + 4 + 20
    assert book["tanh"]["ex1"] == "12.5"  # 25 of 26 items at half a point
    assert _item(students["ada"], "ex2.dlogits")["max_score"] == 5
    # sizes fished out of secret a are not what a submission is graded on: its hidden geometry is its own
    fish = _item(students["fish"], "ex2.dlogits")
    assert (fish["status"], fish["traps"]) == ("failed", ["hardcoded-size"])

    b = _secret_not_drawing(subs / "fish", fixture.hidden_geometry(a).n, avoid=b)
    course.write_text(COURSE.replace('"correct horse battery staple"', f'"{b}"'))
    students_b = _batch(subs, tmp_path / "out-b")
    fish = _item(students_b["fish"], "ex2.dlogits")
    assert (fish["status"], fish["traps"]) == ("failed", ["hardcoded-size"])
    assert _item(students_b["ada"], "ex2.dlogits")["status"] == "passed"

    said = _item(students["tanh"], "ex1.dhpreact")
    assert said["traps"] == ["tanh-preact"]
    if "level" not in inspect.signature(runner.grade).parameters:
        pytest.skip("runner.grade has no `level` yet: the message level could not be checked")
    sub = subs / "tanh"
    levels = {
        level: _item(runner.grade(sub, ("ex1",), only=["dhpreact"], level=level).to_dict(), "ex1.dhpreact")["message"]
        for level in policy.LEVELS
    }
    assert len(set(levels.values())) == 3, levels
    assert said["message"] == levels["hint"]  # course.toml's level reached the students' JSON


def test_resume_regrades_when_the_policy_changes(tmp_path):
    from grader.classroom.batch import grade_batch

    subs = tmp_path / "submissions"
    make_submission(subs / "ada", {"ex2.py": "def dlogits(logits):\n    raise NotImplementedError\n"}, base=None)
    out = tmp_path / "out"
    for points, expected in ((3, 3), (3, 3), (7, 7)):
        course = Policy(points={"ex2.dlogits": points}, secret="correct horse battery staple")
        grade_batch(subs, out, jobs=1, resume=True, progress=False, similarity=False, policy=course)
        ada = json.loads((out / "students" / "ada.json").read_text())
        assert _item(ada, "ex2.dlogits")["max_score"] == expected


def test_cli_names_a_bad_course_toml(tmp_path):
    from grader.cli.main import main

    sub = make_submission(tmp_path / "sub", base=None)
    bad = _write(tmp_path, '[points]\n"ex2.dlogit" = 1\n', "bad.toml")
    result = CliRunner().invoke(main, ["ex2", "--submission", str(sub), "--course", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: points key 'ex2.dlogit' is neither an exercise" in " ".join(result.output.split())
    _write(tmp_path, "level = 3\n")  # found beside the submission folder without --course
    result = CliRunner().invoke(main, ["ex2", "--submission", str(sub)])
    assert result.exit_code == 2 and "level = 3 is not one of" in result.output


def test_sizes_read_out_of_one_submission_do_not_fit_the_next(tmp_path):
    from grader.grading.runner import grade
    from grader.submissions.intake import read_submission

    secret = Policy(secret="correct horse battery staple")
    probe = make_submission(tmp_path / "probe", {"ex2.py": (REFERENCE / "ex2.py").read_text()}, base=None)
    assert grade(probe, ("ex2",), policy=secret).items[0].hidden == "passed"
    # whatever the probe's code saw of its hidden inputs (a print, an exception's text), these were its sizes:
    digest = catalogue.Draw.of(None, read_submission(probe).sources).submission
    fished = fixture.hidden_geometry(secret.secret, digest).n
    ex2 = _only_for(secret.secret).replace(f"(32, {fixture.hidden_geometry(secret.secret).n})", f"(32, {fished})")
    assert f"(32, {fished})" in ex2
    fish = make_submission(tmp_path / "fish", {"ex2.py": ex2}, base=None)
    [item] = grade(fish, ("ex2",), policy=secret).items
    assert (item.status, item.traps) == ("failed", ["hardcoded-size"])  # its own files drew other sizes


def test_no_hidden_geometry_has_a_tensor_as_large_as_its_lecture_twin():
    """n=30, block 4, n_embd 8 has emb as large as the lecture's: view(32, 3, 10) then passed unseen."""
    assert fixture._same_counts(fixture.Geometry(n=30, block_size=4, n_embd=8, n_hidden=72))
    secret = "correct horse battery staple"
    drawn = [fixture.hidden_geometry(secret, bytes([k, j])) for k in range(40) for j in range(50)]
    assert not [g for g in drawn if fixture._same_counts(g)]
    assert len({(g.n, g.block_size, g.n_embd) for g in drawn}) > 300  # still drawn from the whole range


def test_a_students_own_folder_never_sets_policy(tmp_path):
    """`grade ex1 --submission DIR` reads a course.toml beside DIR, never one the student put inside it."""
    student = tmp_path / "ada"
    student.mkdir()
    (student / "course.toml").write_text('level = "full"\nsecret = "chosen by the student to pass"\n')
    assert policy.find(student, inside=False) is None
    assert policy.resolve(None, student, inside=False) == Policy()
    (tmp_path / "course.toml").write_text('level = "hint"\n')
    assert policy.resolve(None, student, inside=False).level == "hint"
