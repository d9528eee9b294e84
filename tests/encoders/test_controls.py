"""TF-IDF + SVD control."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.encoders import load_encoder

from ._helpers import TEXTS, assert_finite

CORPUS = [t for t in TEXTS if t] * 2


def test_tfidf_fitted_on_corpus_texts():
    enc = load_encoder("tfidf-svd-256", corpus_texts=CORPUS)
    assert enc.spec.kind == "control"
    n_features = len(enc.vectorizer.vocabulary_)
    k = min(256, n_features - 1, len(CORPUS) - 1)
    assert enc.spec.dim == k
    emb = enc.encode(CORPUS)
    assert emb.dtype == np.float32 and emb.shape == (len(CORPUS), k)
    assert_finite(emb)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    again = load_encoder("tfidf-svd-256", corpus_texts=CORPUS).encode(CORPUS)
    np.testing.assert_allclose(emb, again, atol=1e-6)  # seeded
    unknown = enc.encode(["zzzz qqqq"])
    assert_finite(unknown)
    assert not unknown.any()


def test_tfidf_fits_on_first_encode_and_revision_names_the_fit():
    enc = load_encoder("tfidf-svd-256")
    assert enc.spec.dim is None and "fit:encoded-texts" in enc.spec.revision
    emb = enc.encode(CORPUS)
    assert emb.shape[1] == enc.spec.dim
    other = load_encoder("tfidf-svd-256", corpus_texts=CORPUS[:5])
    assert other.spec.revision != enc.spec.revision
    with pytest.raises(ValueError, match="at least 2 texts"):
        load_encoder("tfidf-svd-256", corpus_texts=["one text"])
