"""TransformerEncoder on a tiny random-init BERT: pooling, order, batching, token states, attentions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flare_core.encoders import Encoder, TransformerEncoder, random_init_transformer

from ._helpers import TEXTS, TINY_CONFIG, assert_finite, assert_shape, tiny_bert


@pytest.fixture(scope="module")
def enc() -> TransformerEncoder:
    return tiny_bert(seed=0)


def _n_tokens(enc: TransformerEncoder, text: str) -> int:
    return len(enc.tokenizer(text)["input_ids"])


def test_protocol_and_spec(enc):
    assert isinstance(enc, Encoder)
    assert enc.spec.kind == "control" and enc.spec.dim == 32 and enc.spec.layers == 2
    assert not enc.model.training
    assert enc.device == torch.device("cpu")


def test_encode_shape_dtype_finite(enc):
    emb = enc.encode(TEXTS)
    assert emb.dtype == np.float32
    assert_shape(emb, (len(TEXTS), 32), "embeddings")
    assert_finite(emb, "embeddings")


def test_order_preserved(enc):
    emb = enc.encode(TEXTS, batch_size=4)
    rev = enc.encode(TEXTS[::-1], batch_size=4)
    np.testing.assert_allclose(emb, rev[::-1], atol=1e-5)
    one_by_one = np.stack([enc.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(emb, one_by_one, atol=1e-5)


def test_batch_size_invariance(enc):
    np.testing.assert_allclose(enc.encode(TEXTS, batch_size=1), enc.encode(TEXTS, batch_size=8), atol=1e-5)


def test_mean_pooling_equals_mean_of_token_states(enc):
    emb = enc.encode(TEXTS, batch_size=3)
    states = enc.token_states(TEXTS, layers="last", include_special=True, batch_size=2)
    expected = np.stack([s.astype(np.float64).mean(axis=0) for s in states])
    np.testing.assert_allclose(emb, expected, atol=1e-5)


def test_normalize_gives_unit_rows():
    enc = tiny_bert(seed=0, normalize=True)
    emb = enc.encode(TEXTS[:4])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert enc.pooling == "mean+l2"


def test_token_states_last_with_and_without_special(enc):
    with_special = enc.token_states(TEXTS, layers="last")
    without = enc.token_states(TEXTS, layers="last", include_special=False)
    for text, a, b in zip(TEXTS, with_special, without, strict=True):
        n = _n_tokens(enc, text)
        assert_shape(a, (n, 32), "token states")
        assert_shape(b, (n - 2, 32), "content token states")  # [CLS] and [SEP] dropped
        assert a.dtype == np.float32 and b.dtype == np.float32
        np.testing.assert_allclose(a[1:-1], b, atol=1e-6)


def test_token_states_all_layers_and_list(enc):
    texts = TEXTS[:3]
    all_states = enc.token_states(texts, layers="all", batch_size=2)
    last = enc.token_states(texts, layers="last", batch_size=3)
    picked = enc.token_states(texts, layers=[0, -1])
    for text, a, b, c in zip(texts, all_states, last, picked, strict=True):
        n = _n_tokens(enc, text)
        assert_shape(a, (3, n, 32), "all layers")  # L + 1 = 3
        assert_finite(a, "all layers")
        np.testing.assert_allclose(a[-1], b, atol=1e-5)
        assert_shape(c, (2, n, 32), "picked layers")
        np.testing.assert_allclose(c[0], a[0], atol=1e-6)
        np.testing.assert_allclose(c[1], a[2], atol=1e-6)


def test_token_states_max_length(enc):
    states = enc.token_states([TEXTS[3]], max_length=5)
    assert states[0].shape == (5, 32)


def test_attentions_shape_and_rows_sum_to_one(enc):
    before = enc.model.config._attn_implementation
    maps = enc.attentions(TEXTS[:4], batch_size=3)
    for text, att in zip(TEXTS[:4], maps, strict=True):
        n = _n_tokens(enc, text)
        assert_shape(att, (2, 2, n, n), "attentions")
        assert att.dtype == np.float32
        np.testing.assert_allclose(att.sum(axis=-1), 1.0, atol=1e-5)
    assert enc.model.config._attn_implementation == before  # the faster kernel is restored afterwards
    np.testing.assert_allclose(enc.encode(TEXTS[:2]), tiny_bert(seed=0).encode(TEXTS[:2]), atol=1e-5)


def test_seed_determinism():
    a = tiny_bert(seed=0).encode(TEXTS[:3])
    b = tiny_bert(seed=0).encode(TEXTS[:3])
    c = tiny_bert(seed=1).encode(TEXTS[:3])
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


def test_progress_and_empty(enc):
    calls: list[tuple[int, int]] = []
    enc.encode(TEXTS, batch_size=4, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (len(TEXTS), len(TEXTS))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert enc.encode([]).shape == (0, 32)


def test_input_validation(enc):
    with pytest.raises(ValueError, match="batch_size"):
        enc.encode(TEXTS, batch_size=0)
    with pytest.raises(ValueError, match="single string"):
        enc.encode("just one string")
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        enc.encode(["ok", 3])
    with pytest.raises(ValueError, match="layers"):
        enc.token_states(TEXTS[:1], layers="middle")
    with pytest.raises(ValueError, match="out of range"):
        enc.token_states(TEXTS[:1], layers=[5])
    with pytest.raises(ValueError, match="vocab_size"):
        random_init_transformer({**TINY_CONFIG, "vocab_size": 100})
    with pytest.raises(ValueError, match="config"):
        random_init_transformer("bert")


def test_length_batches_group_neighbours_in_length_in_a_seeded_order():
    from flare_core.encoders.base import length_batches

    texts = ["x" * n for n in (5, 90, 30, 70, 10, 50, 20, 80, 60, 40)]
    batches = length_batches(texts, 3)
    groups = [sorted(len(texts[i]) for i in b) for b in batches]
    # neighbours in length share a batch (the shortest is left over); every text once
    assert sorted(groups) == [[5], [10, 20, 30], [40, 50, 60], [70, 80, 90]]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    # the batches come in a seeded order that is neither longest nor shortest first
    many = ["x" * n for n in range(1, 201)]
    firsts = [max(len(many[i]) for i in b) for b in length_batches(many, 10)]
    assert firsts != sorted(firsts, reverse=True) and firsts != sorted(firsts)
    assert [b.tolist() for b in length_batches(many, 10)] == [b.tolist() for b in length_batches(many, 10)]
