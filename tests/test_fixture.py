"""The fixed model and batch: seeded, deterministic, pinned, and checked against autograd."""

import os

import pytest
import torch

from grader.truth import corpus, fixture
from tests.conftest import NAMES_TXT

# If one of these changes, every student's grade may change: bump them only on purpose. The hidden geometry is
# drawn from a course secret (HMAC-SHA256), so pinning one secret's draw pins the drawing too.
PINNED = {
    (fixture.PRIMARY, False): ("b786d4eea75960b6", 3.430793),
    (fixture.hidden_geometry("the pinned course secret"), False): ("dfde609165ca8966", 3.413595),
    (fixture.EX4_PRIMARY, True): ("b786d4eea75960b6", 3.801008),
}


def test_the_pinned_secret_draws_these_sizes():
    g = fixture.hidden_geometry("the pinned course secret")
    assert (g.n, g.block_size, g.n_embd, g.n_hidden, g.seed) == (43, 2, 9, 68, 2809900567)


@pytest.mark.parametrize("key", list(PINNED), ids=lambda k: f"{k[0].n}-{k[0].n_hidden}-{k[1]}")
def test_batch_and_loss_are_pinned(key):
    fx = fixture.build(key[0], ex4=key[1])
    checksum, loss = PINNED[key]
    assert fx.checksum() == checksum, "the fixed batch changed: a torch or corpus change?"
    assert fx.tensors["loss"].item() == pytest.approx(loss, abs=1e-6)


def test_default_corpus_is_the_census_names():
    c = corpus.load()
    assert len(c.words) == 5163 and c.digest == "9323f70f58aca13b"
    assert all(w.isalpha() and w.islower() for w in c.words)


def test_fixture_is_deterministic():
    a = fixture.build(fixture.PRIMARY)
    params = fixture.init_params(fixture.PRIMARY)
    assert all(torch.equal(params[k], a.params[k]) for k in params)
    t, g = fixture.autograd_truth(params, a.Xb, a.Yb)
    assert torch.equal(t["loss"], a.tensors["loss"])
    assert all(torch.equal(g[k], a.truth[k]) for k in a.truth)


def test_truth_covers_every_ex1_variable_with_its_shape():
    fx = fixture.build(fixture.PRIMARY)
    assert sorted(fx.truth) == sorted("d" + v for v in fixture.EX1_ORDER)
    for v in fixture.EX1_ORDER:
        shape = fx.params[v].shape if v in fx.params else fx.tensors[v].shape
        assert fx.truth["d" + v].shape == shape


def test_chunked_forward_matches_cross_entropy():
    fx = fixture.build(fixture.PRIMARY)
    logits = fx.tensors["logits"]
    assert torch.allclose(fx.tensors["loss"], torch.nn.functional.cross_entropy(logits, fx.Yb))


def test_global_rng_does_not_move_the_batch():
    torch.manual_seed(0)
    p0 = fixture.init_params(fixture.PRIMARY)
    torch.manual_seed(123)
    p1 = fixture.init_params(fixture.PRIMARY)
    assert all(torch.equal(p0[k], p1[k]) for k in p0)


def test_variants_differ_from_truth_where_they_should():
    fx = fixture.build(fixture.PRIMARY)
    bessel = fx.variant(fixture.Variant(bessel=True))
    ratio = bessel["dbndiff2"] / fx.truth["dbndiff2"]
    assert torch.allclose(ratio, torch.full_like(ratio, (fx.n - 1) / fx.n), rtol=1e-4)
    tanh = fx.variant(fixture.Variant(tanh_preact=True))
    assert torch.allclose(tanh["dhpreact"], (1 - fx.tensors["hpreact"] ** 2) * fx.truth["dh"])


@pytest.mark.skipif(not NAMES_TXT.exists(), reason="the lecture's names.txt is not on this machine")
def test_data_option_loads_the_lecture_names():
    c = corpus.load(str(NAMES_TXT))
    assert len(c.words) == 32033 and c.words[0] == "emma"
    fx = fixture.build(fixture.PRIMARY, str(NAMES_TXT))
    assert fx.corpus_digest == c.digest != corpus.load().digest


def test_bad_corpus_names_the_line(tmp_path):
    p = tmp_path / "names.txt"
    p.write_text("emma\nzoë\n")
    with pytest.raises(corpus.CorpusError, match="line 2"):
        corpus.load(str(p))


def test_every_secret_lives_in_the_arena_a_sandbox_drops(reference_result):
    from grader.sandbox import arena
    from grader.truth import fixture

    fx = fixture.built_fixtures()[0]
    fx.variant(fixture.Variant(bessel=True))
    secrets = [t for f in fixture.built_fixtures() for t in f.secrets()]
    assert secrets and all(arena.ARENA.holds(t) for t in secrets)
    pid = os.fork()
    if pid == 0:  # what a sandbox child does first
        arena.ARENA.drop()
        os._exit(0 if all(not t.any() for t in secrets) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "a secret survived the drop"
    assert any(t.any() for t in secrets), "the parent's own copy must stay intact"


def test_a_corpus_too_small_to_split_is_refused_with_its_size(tmp_path):
    p = tmp_path / "names.txt"
    p.write_text("emma\nolivia\n")
    with pytest.raises(corpus.CorpusError, match="2 names; at least 100 are needed"):
        corpus.load(str(p))
