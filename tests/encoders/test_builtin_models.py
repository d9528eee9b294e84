"""Each built-in model and control loads from the installed packages and embeds a few texts."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from flare_core.encoders import TransformerEncoder, load_encoder
from flare_core.encoders.builtin import minilm_dir, mpnet_dir
from flare_core.encoders.static import glove_tokenize

from ._helpers import assert_finite, assert_shape

pytestmark = pytest.mark.slow

THREE = [
    "A man is playing a guitar.",
    "Someone is playing the guitar.",
    "The stock market fell sharply today.",
]
EXPECTED_DIM = {
    "all-MiniLM-L6-v2": 384,
    "all-mpnet-base-v2": 768,
    "glove-6b-50d": 50,
    "tokenlearn-static-64d": 64,
    "random-minilm-l6": 384,
    "all-MiniLM-L6-v2-layer3": 384,
}


def _cos(x: np.ndarray) -> np.ndarray:
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x @ x.T


@pytest.fixture(scope="module")
def minilm() -> TransformerEncoder:
    return load_encoder("all-MiniLM-L6-v2", device="cpu")


@pytest.mark.parametrize("model_id", list(EXPECTED_DIM))
def test_loads_and_embeds(model_id, minilm):
    enc = minilm if model_id == "all-MiniLM-L6-v2" else load_encoder(model_id, device="cpu")
    emb = enc.encode(THREE)
    assert emb.dtype == np.float32
    assert_shape(emb, (3, EXPECTED_DIM[model_id]), model_id)
    assert_finite(emb, model_id)
    assert enc.spec.dim == EXPECTED_DIM[model_id]
    if model_id != "random-minilm-l6":
        sim = _cos(emb)
        assert sim[0, 1] > sim[0, 2], f"{model_id}: paraphrases should be closer than unrelated sentences"


def test_minilm_unit_norm_and_matches_sentence_transformers(minilm):
    from sentence_transformers import SentenceTransformer

    emb = minilm.encode(THREE)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    sim = _cos(emb)
    assert sim[0, 1] > 0.6 and sim[0, 2] < 0.3
    reference = SentenceTransformer(str(minilm_dir()), device="cpu", local_files_only=True).encode(THREE)
    np.testing.assert_allclose(emb, reference, atol=1e-5)


def test_minilm_token_states_and_attentions(minilm):
    states = minilm.token_states(THREE[:2], layers="all")
    att = minilm.attentions(THREE[:2])
    for text, s, a in zip(THREE[:2], states, att, strict=True):
        n = len(minilm.tokenizer(text)["input_ids"])
        assert_shape(s, (7, n, 384))
        assert_shape(a, (6, 12, n, n))
        np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-4)


def test_local_folder_goes_through_sentence_transformers(minilm):
    enc = load_encoder(str(minilm_dir()), device="cpu")
    assert (
        (enc.spec.kind, enc.spec.source) == ("transformer", "local")
        and enc.spec.dim == 384
        and enc.spec.layers == 6
    )
    assert enc.spec.revision.startswith("files-")
    np.testing.assert_allclose(enc.encode(THREE), minilm.encode(THREE), atol=1e-5)
    assert enc.token_states(THREE[:1])[0].shape[1] == 384


def test_a_query_prompt_of_the_models_configuration_is_read_for_queries_only():
    enc = load_encoder(str(minilm_dir()), device="cpu")
    queries = ["where is my parcel", "how do I reset my password"]
    assert not any(enc.st_model.prompts.values())  # published without prompts: a query reads as a document
    np.testing.assert_array_equal(enc.encode_queries(queries), enc.encode(queries))
    enc.st_model.prompts = {"query": "query: "}  # as E5 and BGE are published
    asked = enc.encode_queries(queries)
    np.testing.assert_allclose(asked, enc.encode([f"query: {q}" for q in queries]), atol=1e-5)
    assert np.abs(asked - enc.encode(queries)).max() > 0.01
    np.testing.assert_array_equal(enc.encode(queries), minilm_reference(queries))


def minilm_reference(texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_dir()), device="cpu", local_files_only=True).encode(texts)


def test_layer3_is_truncated(minilm):
    enc = load_encoder("all-MiniLM-L6-v2-layer3", device="cpu")
    assert enc.num_layers == 3 and len(enc.model.encoder.layer) == 3
    full = minilm.token_states(THREE[:1], layers=[3])[0][0]
    np.testing.assert_allclose(enc.token_states(THREE[:1])[0], full, atol=1e-4)


def test_mpnet_token_states_and_unit_norm():
    enc = load_encoder("all-mpnet-base-v2", device="cpu")
    emb = enc.encode(THREE)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    states = enc.token_states(THREE[:1], layers="all", include_special=False)[0]
    n = len(enc.tokenizer(THREE[0])["input_ids"]) - 2
    assert_shape(states, (13, n, 768))
    assert_shape(enc.attentions(THREE[:1])[0], (12, 12, n + 2, n + 2))


def test_mpnet_extraction_is_atomic_and_reused(tmp_path):
    root = tmp_path / "cache"
    try:
        folder = mpnet_dir(root)
        assert folder == root / "models" / "all-mpnet-base-v2"
        assert (folder / "model.safetensors").stat().st_size > 400_000_000
        assert not list((root / "models").glob(".tmp-*"))
        marker = folder / ".flare-complete"
        stamp = os.stat(marker).st_mtime_ns
        assert mpnet_dir(root) == folder
        assert os.stat(marker).st_mtime_ns == stamp  # not extracted again
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_static_models_handle_texts_without_words():
    glove = load_encoder("glove-6b-50d")
    emb = glove.encode(["the cat", "", "!!! ???", "qqqzzzxxx"])
    assert_finite(emb)
    assert emb[0].any() and not emb[1:].any()
    assert glove.empty_rows.tolist() == [1, 2, 3]
    assert glove_tokenize("Don't STOP, 2 cats!") == ["don't", "stop", "2", "cats"]
    static = load_encoder("tokenlearn-static-64d")
    emb = static.encode(["the cat", ""])
    assert_finite(emb)
    np.testing.assert_allclose(np.linalg.norm(emb[0]), 1.0, atol=1e-5)
    assert not emb[1].any() and static.empty_rows.tolist() == [1]
