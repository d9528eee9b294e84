"""The encoders' shared front: validation before any work, the chunked loop, unit rows."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.encoders import PrecomputedEncoder
from flare_core.encoders.base import EncoderBase, encode_in_chunks, unit_rows
from flare_core.encoders.controls import TfidfSvdEncoder
from flare_core.encoders.doc2vec import Doc2VecEncoder
from flare_core.encoders.fasttext import FastTextEncoder
from flare_core.encoders.registry import list_models


def test_unit_rows_scales_each_row_and_names_the_zero_ones():
    x = np.array([[3.0, 4.0], [0.0, 0.0], [1e-13, 0.0], [0.0, -2.0]])
    rows, zero = unit_rows(x)
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0], [0.0, 0.0], [0.0, -1.0]])
    assert rows.dtype == x.dtype and zero.tolist() == [1, 2]


def test_encode_in_chunks_keeps_the_order_and_reports_each_chunk():
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    calls: list[tuple[int, int]] = []
    out = encode_in_chunks(
        texts,
        2,
        2,
        lambda chunk: [[len(t), -len(t)] for t in chunk],
        lambda done, total: calls.append((done, total)),
    )
    np.testing.assert_array_equal(out, [[1, -1], [2, -2], [3, -3], [4, -4], [5, -5]])
    assert out.dtype == np.float32 and calls == [(2, 5), (4, 5), (5, 5)]
    with pytest.raises(RuntimeError, match=r"shape \(2, 3\), expected \(2, 2\)"):
        encode_in_chunks(texts, 2, 2, lambda chunk: np.zeros((len(chunk), 3)))


def _spec(model_id: str):
    return next(s for s in list_models() if s.id == model_id)


UNFITTED = {
    "tfidf-svd-256": lambda: TfidfSvdEncoder(_spec("tfidf-svd-256")),
    "doc2vec-corpus-100": lambda: Doc2VecEncoder(_spec("doc2vec-corpus-100"), vector_size=8, epochs=1),
    "fasttext-corpus-100": lambda: FastTextEncoder(_spec("fasttext-corpus-100"), vector_size=8, epochs=1),
}


@pytest.mark.parametrize("model_id", sorted(UNFITTED))
@pytest.mark.parametrize(
    ("texts", "options", "message"),
    [
        ("one string", {}, "not a single string"),
        (["fine", 3], {}, r"texts\[1\] is int"),
        (["fine", "texts"], {"batch_size": 0}, "batch_size"),
        (["fine", "texts"], {"max_length": 1}, "max_length"),
    ],
)
def test_a_corpus_fitted_encoder_refuses_bad_arguments_before_it_fits(model_id, texts, options, message):
    encoder = UNFITTED[model_id]()
    assert isinstance(encoder, EncoderBase)
    revision = encoder.spec.revision
    with pytest.raises(ValueError, match=message):
        encoder.encode(texts, **options)
    assert not encoder.fitted and encoder.spec.revision == revision  # nothing was fitted on bad input


def test_a_corpus_fitted_encoder_fits_on_its_first_texts_and_names_them_in_its_revision():
    texts = ["the cat sat on the mat", "a dog ran in the park", "the cat and the dog", "rain in the park"]
    first, again = TfidfSvdEncoder(_spec("tfidf-svd-256")), TfidfSvdEncoder(_spec("tfidf-svd-256"))
    x = first.encode(texts)
    assert first.fitted and x.shape == (4, first.spec.dim) and first.spec.dim == 3  # n_docs - 1 components
    assert first.spec.revision == again.fit(texts).spec.revision
    assert first.spec.revision != TfidfSvdEncoder(_spec("tfidf-svd-256"), texts[:3]).spec.revision
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)


def test_a_precomputed_encoder_checks_its_texts_like_the_others():
    encoder = PrecomputedEncoder("mine", np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["a", "b", "c"], batch_size=0)
    with pytest.raises(ValueError, match="3 rows, but 2 texts"):
        encoder.encode(["a", "b"])
    np.testing.assert_array_equal(encoder.encode(["a", "b", "c"]), np.eye(3))
