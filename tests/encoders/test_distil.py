"""The Model2Vec recipe step by step against independent references (a tiny random BERT, sklearn's PCA,
hand-computed weights and means), the distilled encoder, and the pool's other added candidates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from flare_core.encoders import ModelSpec, list_models
from flare_core.encoders.builtin import minilm_dir
from flare_core.encoders.distil import (
    StaticDistilEncoder,
    distil_dir,
    distil_ready,
    kept_tokens,
    pca_scores,
    sif_weights,
    token_outputs,
    write_distils,
)
from flare_core.encoders.extra_models import UseEncoder, use_spec
from flare_core.encoders.fasttext import FastTextEncoder
from tests.encoders._helpers import TEXTS, tiny_bert

SPEC = ModelSpec(
    id="m2v-test-4", dim=4, layers=None, max_tokens=512, source="test", licence="n/a", kind="static",
    description="test distil", revision="test",
)  # fmt: skip


def test_kept_tokens_leave_out_the_unused_ones_in_id_order():
    vocab = {"[PAD]": 0, "[unused0]": 1, "[unused12]": 2, "[CLS]": 3, "cat": 7, "unused": 5}
    assert kept_tokens(vocab).tolist() == [0, 3, 5, 7]


def test_token_outputs_are_the_mean_of_cls_token_sep():
    model = tiny_bert().model

    def forward(ids: np.ndarray) -> np.ndarray:
        batch = torch.from_numpy(ids)
        with torch.inference_mode():
            return (
                model(input_ids=batch, attention_mask=torch.ones_like(batch))
                .last_hidden_state.mean(1)
                .numpy()
            )

    ids = np.array([1996, 4937, 2006, 7592, 999], dtype=np.int64)
    got = token_outputs(forward, ids, 101, 102, batch_size=2)  # three batches: 2, 2, 1
    with torch.inference_mode():
        for row, token in zip(got, ids, strict=True):
            states = model(input_ids=torch.tensor([[101, int(token), 102]])).last_hidden_state[0]
            np.testing.assert_allclose(row, states.mean(0).numpy(), rtol=1e-5, atol=1e-6)


def test_pca_scores_match_sklearn_up_to_each_column_sign():
    x = np.random.default_rng(0).normal(size=(200, 6)) @ np.diag([5, 3, 2, 1, 0.5, 0.1])
    got = pca_scores(x, 3)
    want = PCA(n_components=3).fit_transform(x)
    for k in range(3):
        sign = np.sign(want[np.abs(want[:, k]).argmax(), k])
        np.testing.assert_allclose(got[:, k], sign * want[:, k], rtol=1e-8, atol=1e-8)
        assert got[np.abs(got[:, k]).argmax(), k] > 0  # model2vec's sign convention
    with pytest.raises(ValueError, match="larger than the model's 6"):
        pca_scores(x, 7)


def test_sif_weights_by_hand():
    # ranks 0, 1, 2 → 1/2, 1/3, 1/4, normalised: 6/13, 4/13, 3/13; weight a / (a + p)
    a = 0.5
    want = [a / (a + 6 / 13), a / (a + 4 / 13), a / (a + 3 / 13)]
    np.testing.assert_allclose(sif_weights(3, a), want, rtol=1e-12)
    with pytest.raises(ValueError, match="coefficient"):
        sif_weights(3, 0.0)


def _write(outputs: np.ndarray, ids: np.ndarray, revision: str = "r1") -> None:
    write_distils(outputs, ids, {SPEC.id: 4}, {"base": "test", "base_revision": revision})


def test_the_distilled_encoder_is_the_normalised_mean_of_its_tokens_rows():
    vocab_ids = np.array([0, 100, 101, 102, 1996, 4937, 2006, 1037], dtype=np.int64)  # [PAD] [UNK] ... a
    outputs = np.random.default_rng(1).normal(size=(len(vocab_ids), 8)).astype(np.float32)
    _write(outputs, vocab_ids)
    table = (pca_scores(outputs, 4) * sif_weights(len(outputs))[:, None]).astype(np.float16)
    encoder = StaticDistilEncoder(SPEC, distil_dir(SPEC.id), minilm_dir() / "tokenizer.json", unk_id=100)
    # "the cat on a dog": the, cat, on, a are rows 4, 5, 6, 7; "dog" (3899) is not in this vocabulary
    got = encoder.encode(["the cat on a dog", "", "dog", "The CAT"])
    mean = table[[4, 5, 6, 7]].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(got[0], mean / np.linalg.norm(mean), rtol=1e-5)
    assert not got[1].any() and not got[2].any() and encoder.empty_rows.tolist() == [1, 2]
    both = table[[4, 5]].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(got[3], both / np.linalg.norm(both), rtol=1e-5)  # lower-cased by the tokenizer
    np.testing.assert_allclose(encoder.encode(["the cat on a dog"], max_length=2)[0], got[3], rtol=1e-6)


def test_a_built_distil_is_kept_until_its_base_changes():
    ids = np.array([0, 1996, 4937], dtype=np.int64)
    outputs = np.random.default_rng(2).normal(size=(3, 6)).astype(np.float32)
    _write(outputs, ids, "base-1")
    vectors = distil_dir(SPEC.id) / "vectors.npy"
    first = vectors.stat().st_mtime_ns
    assert distil_ready(SPEC.id, "base-1") and not distil_ready(SPEC.id, "base-2")
    _write(outputs * 2, ids, "base-1")
    assert vectors.stat().st_mtime_ns == first
    _write(outputs * 2, ids, "base-2")
    assert distil_ready(SPEC.id, "base-2") and not distil_ready(SPEC.id, "base-1")


def test_the_pool_has_sixteen_trained_candidates_from_six_families():
    trained = [s for s in list_models() if s.role == "candidate"]
    assert len(trained) >= 16 and len({s.family for s in trained}) >= 6
    distils = [s for s in trained if s.id.startswith("m2v-")]
    assert {s.dim for s in distils} == {256, 64} and len(distils) == 6
    assert all("distilled here from" in s.source and s.licence.startswith("Apache-2.0") for s in distils)


def test_fasttext_is_reproducible_and_reads_unseen_words_from_their_ngrams():
    spec = next(s for s in list_models() if s.id == "fasttext-corpus-100")
    corpus = [t for t in TEXTS if t] * 6
    first = FastTextEncoder(spec, corpus_texts=corpus, vector_size=16, epochs=3)
    again = FastTextEncoder(spec, corpus_texts=corpus, vector_size=16, epochs=3)
    x = first.encode([*TEXTS, "catz"])
    np.testing.assert_array_equal(x, again.encode([*TEXTS, "catz"]))
    assert x.shape == (len(TEXTS) + 1, 16) and x.dtype == np.float32
    norms = np.linalg.norm(x, axis=1)
    assert first.empty_rows.tolist() == [6]  # the empty text
    np.testing.assert_allclose(np.delete(norms, 6), 1.0, rtol=1e-5)
    assert norms[-1] > 0.99  # "catz" was never seen: its character n-grams give it a vector
    assert first.parameter_bytes() > 0 and "|fit:" in first.spec.revision


def test_the_universal_sentence_encoder_tells_close_texts_from_far_ones():
    encoder = UseEncoder(use_spec(), threads=1)
    x = encoder.encode(["The cat sat on the mat.", "A kitten is sitting on a rug.", "Stocks fell sharply."])
    assert x.shape == (3, 512) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)
    assert x[0] @ x[1] > x[0] @ x[2] + 0.3


def test_the_time_plan_counts_a_distils_build_until_it_is_built(tmp_path, monkeypatch):
    from flare_core.encoders.extra_models import DISTIL_BASES, distil_build_seconds
    from flare_core.run.embedding_stage import model_cost
    from flare_core.run.eta import seconds_to_units

    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    mpnet = next(b for b in DISTIL_BASES if b.short == "mpnet")
    assert distil_build_seconds("m2v-mpnet-64") == mpnet.build_seconds / 2
    assert distil_build_seconds("all-MiniLM-L6-v2") == 0.0
    before = model_cost({"id": "m2v-mpnet-64"})[1]
    outputs = np.random.default_rng(3).normal(size=(4, 70)).astype(np.float32)
    write_distils(outputs, np.arange(4), {"m2v-mpnet-64": 64}, {"base_revision": mpnet.revision()})
    assert distil_build_seconds("m2v-mpnet-64") == 0.0
    assert before - model_cost({"id": "m2v-mpnet-64"})[1] == pytest.approx(
        seconds_to_units(mpnet.build_seconds / 2)
    )
