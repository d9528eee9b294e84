"""Models built on the corpus (TF-IDF + SVD, Doc2Vec) and the shuffled-rows control."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.encoders import load_encoder

from ._helpers import TEXTS, assert_finite

CORPUS = [t for t in TEXTS if t] * 2


def test_tfidf_fitted_on_corpus_texts():
    enc = load_encoder("tfidf-svd-256", corpus_texts=CORPUS)
    assert (enc.spec.kind, enc.spec.role) == ("corpus", "candidate")
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


def test_tfidf_fits_a_list_of_distinct_words_by_keeping_the_hapaxes():
    # 60 distinct words, each seen once: dropping words seen once (min_df=2) would leave no vocabulary
    words = [f"word{i:02d}" for i in range(60)]
    enc = load_encoder("tfidf-svd-256", corpus_texts=words)
    assert len(enc.vectorizer.vocabulary_) == 60
    emb = enc.encode(words)
    assert emb.shape == (60, 59)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # distinct words share no term, so TF-IDF cannot relate them: their cosines are all but zero
    cosines = emb @ emb.T
    assert np.abs(cosines[~np.eye(60, dtype=bool)]).max() < 0.2


@pytest.mark.parametrize("model", ["doc2vec-corpus-100", "fasttext-corpus-100"])
def test_a_model_fitted_on_the_corpus_trains_on_a_list_of_distinct_words(model):
    words = [f"word{i:02d}" for i in range(60)]  # none seen twice: the usual min_count would keep none
    emb = load_encoder(model, corpus_texts=words).encode(words)
    assert emb.shape == (60, 100)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)


def test_tfidf_fits_on_first_encode_and_revision_names_the_fit():
    enc = load_encoder("tfidf-svd-256")
    assert enc.spec.dim is None and "fit:encoded-texts" in enc.spec.revision
    emb = enc.encode(CORPUS)
    assert emb.shape[1] == enc.spec.dim
    other = load_encoder("tfidf-svd-256", corpus_texts=CORPUS[:5])
    assert other.spec.revision != enc.spec.revision
    with pytest.raises(ValueError, match="at least 2 texts"):
        load_encoder("tfidf-svd-256", corpus_texts=["one text"])


def test_doc2vec_trains_on_the_corpus_and_is_reproducible_across_processes():
    import os
    import subprocess
    import sys

    enc = load_encoder("doc2vec-corpus-100", corpus_texts=CORPUS)
    assert (enc.spec.dim, enc.spec.kind, enc.spec.role) == (100, "corpus", "candidate")
    emb = enc.encode(CORPUS)
    assert emb.shape == (len(CORPUS), 100) and emb.dtype == np.float32
    assert_finite(emb)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # a corpus text gets the vector trained for it (normalised)
    first = enc.model.dv[0] / np.linalg.norm(enc.model.dv[0])
    np.testing.assert_allclose(emb[0], first, atol=1e-6)
    # a new text is inferred, the same way twice
    new = ["The striker scored twice in the cup final.", "The cat sat on the mat, again."]
    np.testing.assert_array_equal(enc.encode(new), enc.encode(new))
    # and identically in another process whose str hash is salted differently (gensim's default is not)
    script = (
        "import sys, numpy as np\n"
        "from flare_core.encoders import load_encoder\n"
        f"corpus = {CORPUS!r}\nnew = {new!r}\n"
        "enc = load_encoder('doc2vec-corpus-100', corpus_texts=corpus)\n"
        "np.save(sys.argv[1], np.vstack([enc.encode(corpus), enc.encode(new)]))\n"
        "print(hash('salted'))\n"
    )
    path = f"{pytest.importorskip('tempfile').mkdtemp()}/d2v.npy"
    salt = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {**os.environ, "PYTHONHASHSEED": salt}
    done = subprocess.run(
        [sys.executable, "-c", script, path], check=True, env=env, timeout=300, capture_output=True, text=True
    )
    assert int(done.stdout.split()[-1]) != hash("salted")  # the other process hashed strings differently
    np.testing.assert_array_equal(np.load(path), np.vstack([emb, enc.encode(new)]))
    with pytest.raises(ValueError, match="at least 2 texts"):
        load_encoder("doc2vec-corpus-100", corpus_texts=["one text"])


def test_shuffled_control_keeps_the_geometry_and_breaks_the_pairing():
    texts = [f"{t} {i}" for i, t in enumerate(TEXTS * 6) if t]
    glove = load_encoder("glove-6b-50d").encode(texts)
    control = load_encoder("shuffled-glove-6b-50d")
    assert control.spec.role == "control"
    shuffled = control.encode(texts)
    assert shuffled.shape == glove.shape
    # the same set of rows ...
    np.testing.assert_array_equal(np.sort(shuffled, axis=0), np.sort(glove, axis=0))
    # ... handed to other texts: few rows stay where they were, and the order is seeded
    kept = np.mean([np.array_equal(a, b) for a, b in zip(shuffled, glove, strict=True)])
    assert kept < 0.2
    np.testing.assert_array_equal(shuffled, load_encoder("shuffled-glove-6b-50d").encode(texts))
