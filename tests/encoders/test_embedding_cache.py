"""Embedding cache: hits compute nothing, keys separate models and token limits, files are atomic."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from flare_core.encoders import cache_key, cache_key_fields, embed, texts_hash

from ._helpers import TEXTS, CountingEncoder, assert_finite, tiny_bert

CORPUS = TEXTS[:6]
CORPUS_HASH = texts_hash(CORPUS)


@pytest.fixture(scope="module")
def inner():
    return tiny_bert(seed=0)


def test_second_call_computes_nothing(inner, tmp_path):
    enc = CountingEncoder(inner)
    first = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path, batch_size=4)
    assert enc.calls == 1 and enc.texts_encoded == len(CORPUS)
    assert first.dtype == np.float32 and first.shape == (len(CORPUS), 32)
    assert_finite(first, "embeddings")
    progress: list[tuple[int, int]] = []
    second = embed(
        enc,
        CORPUS,
        corpus_hash=CORPUS_HASH,
        cache_dir=tmp_path,
        progress=lambda d, t: progress.append((d, t)),
    )
    assert enc.calls == 1, "a cache hit must not run the encoder"
    np.testing.assert_array_equal(first, second)
    assert progress == [(len(CORPUS), len(CORPUS))]
    # exactly one entry: <key>.npy + <key>.json, no temporary files left behind
    names = sorted(p.name for p in tmp_path.iterdir())
    key = cache_key(cache_key_fields(enc, CORPUS_HASH, None))
    assert names == [f"{key}.json", f"{key}.npy"]
    meta = json.loads((tmp_path / f"{key}.json").read_text())
    assert meta["model_id"] == inner.spec.id and meta["revision"] == inner.spec.revision
    assert meta["corpus_hash"] == CORPUS_HASH and meta["max_length"] is None and meta["pooling"] == "mean"
    assert meta["n_rows"] == len(CORPUS) and meta["dim"] == 32


def test_max_length_and_model_change_the_key(inner, tmp_path):
    enc = CountingEncoder(inner)
    full = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path)
    short = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path, max_length=4)
    assert enc.calls == 2
    assert not np.allclose(full, short)  # truncation changed long texts
    embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path, max_length=4)
    assert enc.calls == 2

    other = CountingEncoder(tiny_bert(seed=1), spec=dataclasses.replace(inner.spec, id="tiny-seed1"))
    embed(other, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path)
    assert other.calls == 1
    newer = CountingEncoder(inner, spec=dataclasses.replace(inner.spec, revision="another-revision"))
    embed(newer, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path)
    assert newer.calls == 1
    embed(enc, CORPUS[:5], corpus_hash=texts_hash(CORPUS[:5]), cache_dir=tmp_path)
    assert enc.calls == 3
    assert len(list(tmp_path.glob("*.npy"))) == 5

    fields = [cache_key_fields(inner, CORPUS_HASH, m) for m in (None, 4, 8)]
    assert len({cache_key(f) for f in fields}) == 3


def test_no_cache_dir_always_computes(inner):
    enc = CountingEncoder(inner)
    a = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=None)
    b = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=None)
    assert enc.calls == 2
    np.testing.assert_array_equal(a, b)


def test_corrupt_entry_is_recomputed(inner, tmp_path):
    enc = CountingEncoder(inner)
    first = np.array(embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path))  # a copy: the file
    (npy,) = tmp_path.glob("*.npy")  # is about to be overwritten in place, under any memmap of it
    npy.write_bytes(b"not an npy file")
    again = embed(enc, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path)
    assert enc.calls == 2
    np.testing.assert_array_equal(first, again)


def test_validation(inner, tmp_path):
    with pytest.raises(ValueError, match="corpus_hash"):
        embed(inner, CORPUS, corpus_hash="", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="max_length"):
        embed(inner, CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path, max_length=0)

    class NoMaxLength:
        spec = inner.spec

        def encode(self, texts, *, batch_size=32, progress=None):
            return inner.encode(texts, batch_size=batch_size, progress=progress)

    with pytest.raises(ValueError, match="does not accept max_length"):
        embed(NoMaxLength(), CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path, max_length=8)
    out = embed(NoMaxLength(), CORPUS, corpus_hash=CORPUS_HASH, cache_dir=tmp_path)
    assert out.shape == (len(CORPUS), 32)
