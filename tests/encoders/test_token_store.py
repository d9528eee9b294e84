"""Token states streamed to a store on disk: same arrays as token_states, atomic, validated on open."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flare_core.analyses.collapse import pair_distances
from flare_core.encoders import TokenStates, texts_hash, write_token_states
from flare_core.encoders.token_store import META_FILE, OFFSETS_FILE, TOKENS_FILE, DamagedTokenStore
from flare_core.store import atomic

from ._helpers import TEXTS, tiny_bert

CORPUS = [f"{text} Note {i}." for i in range(3) for text in TEXTS]  # 27 texts


@pytest.fixture(scope="module")
def enc():
    return tiny_bert(seed=0)


@pytest.fixture(scope="module")
def reference(enc):
    """encoder.token_states of CORPUS 8 texts at a time (the store's chunks), batches of 4."""
    return [
        states
        for k in range(0, len(CORPUS), 8)
        for states in enc.token_states(CORPUS[k : k + 8], batch_size=4)
    ]


@pytest.fixture
def store(enc, tmp_path) -> TokenStates:
    return write_token_states(enc, CORPUS, tmp_path / "store", batch_size=4, chunk_size=8)


def _entries(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_store_matches_token_states(store, reference, tmp_path):
    # the same chunks of 8 texts in the same length-sorted batches of 4: identical arrays
    assert len(store) == len(CORPUS) and store.dim == 32 and store.n_layers is None
    for i, expected in enumerate(reference):
        got = store[i]
        assert got.dtype == np.float32 and got.shape == expected.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(store.lengths, [len(r) for r in reference])
    assert store.total_tokens == sum(len(r) for r in reference) == int(store.offsets[-1])
    assert store.nbytes == store.total_tokens * 32 * 4
    assert _entries(tmp_path) == ["store"]
    assert _entries(tmp_path / "store") == sorted([META_FILE, OFFSETS_FILE, TOKENS_FILE])
    meta = json.loads((tmp_path / "store" / META_FILE).read_text())
    assert meta["model_id"] == store.meta["model_id"] and meta["n_texts"] == len(CORPUS)
    assert meta["layers"] == "last" and meta["include_special"] is True and meta["max_length"] is None
    assert meta["dtype"] == "float32" and meta["total_tokens"] == store.total_tokens and meta["dim"] == 32
    assert meta["texts_hash"] == texts_hash(CORPUS)
    rows = np.load(tmp_path / "store" / TOKENS_FILE, mmap_mode="r")  # an ordinary .npy file
    assert rows.shape == (store.total_tokens, 32)


def test_indexing(store, reference):
    np.testing.assert_array_equal(store[-1], reference[-1])
    np.testing.assert_array_equal(store[-len(CORPUS)], reference[0])
    np.testing.assert_array_equal(store[np.int64(3)], reference[3])
    for bad in (len(CORPUS), -len(CORPUS) - 1):
        with pytest.raises(IndexError, match="out of range"):
            store[bad]
    with pytest.raises(TypeError):
        store["1"]
    sliced = store[2:7:2]
    assert isinstance(sliced, list) and len(sliced) == 3
    np.testing.assert_array_equal(sliced[1], reference[4])
    assert sum(1 for _ in store) == len(CORPUS)
    copy = store[0]
    copy[:] = 0.0  # arrays are fresh copies: the store is unchanged
    np.testing.assert_array_equal(store[0], reference[0])


def test_chunks_that_change_batches_agree_closely(enc, reference, tmp_path):
    states = write_token_states(enc, CORPUS, tmp_path / "s", batch_size=4, chunk_size=5)
    for got, expected in zip(states, reference, strict=True):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_pair_distances_reads_the_store(store, reference):
    pairs = np.array([[0, 1], [2, 5], [26, 3], [10, 11], [7, 20]])
    from_store = pair_distances(store, pairs, device="cpu")
    from_lists = pair_distances(reference, pairs, device="cpu")
    np.testing.assert_array_equal(from_store.to_numpy(), from_lists.to_numpy())
    # a tiny memory budget makes pair_distances assemble its chunks text by text
    small = pair_distances(store, pairs, device="cpu", max_memory_mb=0.01)
    small_lists = pair_distances(reference, pairs, device="cpu", max_memory_mb=0.01)
    np.testing.assert_array_equal(small.to_numpy(), small_lists.to_numpy())
    all_pairs = pair_distances(store[:6], device="cpu")
    np.testing.assert_array_equal(
        all_pairs.to_numpy(), pair_distances(reference[:6], device="cpu").to_numpy()
    )


def test_several_layers_and_no_special_tokens(enc, tmp_path):
    picked = write_token_states(
        enc, CORPUS, tmp_path / "k", layers=[0, -1], include_special=False, batch_size=4, chunk_size=4
    )
    expected = [  # the store's chunks of 4 texts, one batch each
        states
        for k in range(0, len(CORPUS), 4)
        for states in enc.token_states(CORPUS[k : k + 4], layers=[0, -1], include_special=False, batch_size=4)
    ]
    assert picked.n_layers == 2 and picked.rows.shape == (picked.total_tokens, 2, 32)
    assert picked.meta["layers"] == [0, -1] and picked.meta["include_special"] is False
    for got, want in zip(picked, expected, strict=True):
        assert got.shape == want.shape  # (K, n_i, d)
        np.testing.assert_array_equal(got, want)
    assert picked.lengths[CORPUS.index(" Note 0.")] == 3  # the empty text keeps only "note", "0", "."
    every = write_token_states(enc, CORPUS[:3], tmp_path / "all", layers="all")
    assert every.n_layers == 3 and every[0].shape[0] == 3


def test_max_length_is_passed_on(enc, tmp_path):
    short = write_token_states(enc, CORPUS, tmp_path / "m", max_length=6, batch_size=4)
    assert short.lengths.max() == 6 and short.meta["max_length"] == 6


def test_float16_storage(enc, reference, tmp_path):
    half = write_token_states(enc, CORPUS, tmp_path / "h", batch_size=4, chunk_size=8, dtype="float16")
    full = write_token_states(enc, CORPUS, tmp_path / "f", batch_size=4, chunk_size=8)
    assert half.dtype == np.float16 and half.nbytes * 2 == full.nbytes
    assert (tmp_path / "h" / TOKENS_FILE).stat().st_size < 0.52 * (
        tmp_path / "f" / TOKENS_FILE
    ).stat().st_size
    for got, want in zip(half, reference, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2.0**-11, atol=2.0**-24)  # 11 significant bits


def test_float16_overflow_is_refused(tmp_path):
    class Loud:
        spec = tiny_bert().spec

        def token_states(self, texts, **kwargs):
            return [np.full((2, 4), 1e5 if i == 1 else 1.0, dtype=np.float32) for i, _ in enumerate(texts)]

    with pytest.raises(ValueError, match="text 1 exceed the float16 range"):
        write_token_states(Loud(), ["a", "b"], tmp_path / "x", dtype="float16")
    assert _entries(tmp_path) == []
    assert write_token_states(Loud(), ["a", "b"], tmp_path / "x")[1].max() == 1e5


def test_progress(enc, tmp_path):
    calls: list[tuple[int, int]] = []
    write_token_states(enc, CORPUS, tmp_path / "p", chunk_size=10, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(10, 27), (20, 27), (27, 27)]
    # batches smaller than a chunk report too, each count once, over the whole corpus
    calls.clear()
    write_token_states(
        enc, CORPUS, tmp_path / "q", chunk_size=10, batch_size=4, progress=lambda d, t: calls.append((d, t))
    )
    done = [d for d, _ in calls]
    # batches of 4, 4 and 2 texts in each chunk of 10 (in a seeded order): 8 reports, rising, each chunk's end
    assert len(calls) == 8 and all(t == 27 for _, t in calls) and done == sorted(set(done))
    assert {10, 20, 27} <= set(done) and int(np.diff([0, *done]).max()) == 4


class _Broken:
    """token_states that goes wrong on the second chunk."""

    def __init__(self, enc, how: str) -> None:
        self.enc, self.how, self.spec, self.calls = enc, how, enc.spec, 0

    def token_states(self, texts, **kwargs):
        self.calls += 1
        out = self.enc.token_states(texts, **kwargs)
        if self.calls < 2:
            return out
        if self.how == "interrupt":
            raise KeyboardInterrupt
        if self.how == "nan":
            out[1][0, 0] = np.nan
        elif self.how == "count":
            out = out[:-1]
        elif self.how == "dim":
            out[0] = out[0][:, :-1]
        elif self.how == "ndim":
            out[0] = out[0][None]
        return out


@pytest.mark.parametrize(
    ("how", "error", "message"),
    [
        ("interrupt", KeyboardInterrupt, None),
        ("nan", RuntimeError, "text 9 contains non-finite"),
        ("count", RuntimeError, "returned 7 arrays for the 8 texts 8:16"),
        ("dim", RuntimeError, r"text 8 has rows of shape \(31,\), earlier texts \(32,\)"),
        ("ndim", RuntimeError, r"text 8: expected a float \(n, d\) array"),
    ],
)
def test_failure_leaves_nothing_and_keeps_an_old_store(enc, tmp_path, how, error, message):
    with pytest.raises(error, match=message):
        write_token_states(_Broken(enc, how), CORPUS, tmp_path / "s", chunk_size=8)
    assert _entries(tmp_path) == []
    old = write_token_states(enc, CORPUS[:2], tmp_path / "s")
    with pytest.raises(error, match=message):
        write_token_states(_Broken(enc, how), CORPUS, tmp_path / "s", chunk_size=8, overwrite=True)
    assert _entries(tmp_path) == ["s"] and len(TokenStates.open(tmp_path / "s")) == len(old) == 2


def test_existing_store_needs_overwrite(enc, tmp_path):
    write_token_states(enc, CORPUS[:2], tmp_path / "s")
    with pytest.raises(FileExistsError, match="not empty"):
        write_token_states(enc, CORPUS[:3], tmp_path / "s")
    assert len(write_token_states(enc, CORPUS[:3], tmp_path / "s", overwrite=True)) == 3
    assert _entries(tmp_path) == ["s"]
    (tmp_path / "empty").mkdir()
    assert len(write_token_states(enc, CORPUS[:1], tmp_path / "empty")) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"texts": []}, "texts is empty"),
        ({"texts": "one string"}, "not a single string"),
        ({"layers": "first"}, "layers must be"),
        ({"layers": []}, "empty list"),
        ({"layers": [0.5]}, "integers"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"max_length": 1}, "max_length"),
        ({"dtype": "float64"}, "dtype must be one of"),
        ({"include_special": 1}, "include_special"),
        ({"progress": 3}, "progress"),
    ],
)
def test_validation(enc, tmp_path, kwargs, message):
    args = {"texts": CORPUS[:2], **kwargs}
    texts = args.pop("texts")
    with pytest.raises(ValueError, match=message):
        write_token_states(enc, texts, tmp_path / "s", **args)
    with pytest.raises(ValueError, match="token_states"):
        write_token_states(object(), CORPUS[:2], tmp_path / "s")
    assert _entries(tmp_path) == []


# ---------------------------------------------------------------- corrupt stores


def _rewrite_meta(folder, **changes) -> None:
    meta = json.loads((folder / META_FILE).read_text())
    meta.update(changes)
    atomic.write_json(folder / META_FILE, meta)


@pytest.mark.parametrize(
    ("damage", "file", "message"),
    [
        (lambda f: (f / OFFSETS_FILE).unlink(), OFFSETS_FILE, "is missing"),
        (lambda f: (f / META_FILE).write_text("{"), META_FILE, "is not readable JSON"),
        (lambda f: _rewrite_meta(f, format="other"), META_FILE, "does not describe"),
        (lambda f: _rewrite_meta(f, version=2), META_FILE, "format version 2"),
        (lambda f: _rewrite_meta(f, n_texts=-1), META_FILE, "'n_texts' -1"),
        (lambda f: _rewrite_meta(f, dtype="int8"), META_FILE, "dtype 'int8'"),
        (lambda f: _rewrite_meta(f, n_layers=0), META_FILE, "n_layers 0"),
        (lambda f: _rewrite_meta(f, n_texts=26), OFFSETS_FILE, r"expected int64 \(27,\)"),
        (lambda f: _rewrite_meta(f, dim=31), TOKENS_FILE, "expected float32"),
        (lambda f: _rewrite_meta(f, dtype="float16"), TOKENS_FILE, "expected float16"),
        (lambda f: _rewrite_meta(f, total_tokens=5), OFFSETS_FILE, "runs from 0 to"),
        (lambda f: np.save(f / OFFSETS_FILE, np.arange(28, dtype=np.int32)), OFFSETS_FILE, "holds int32"),
        (lambda f: np.save(f / OFFSETS_FILE, _swap(np.load(f / OFFSETS_FILE))), OFFSETS_FILE, "decrease"),
        (lambda f: np.save(f / TOKENS_FILE, np.zeros((3, 32), np.float32)), TOKENS_FILE, "is float32 "),
        (lambda f: _truncate(f / TOKENS_FILE), TOKENS_FILE, "cannot be read"),
        (lambda f: _truncate(f / OFFSETS_FILE), OFFSETS_FILE, "cannot be read"),
        (lambda f: _garbage(f / TOKENS_FILE), TOKENS_FILE, "cannot be read"),
        (lambda f: _garbage(f / OFFSETS_FILE), OFFSETS_FILE, "cannot be read"),
        (
            lambda f: np.save(f / TOKENS_FILE, np.asfortranarray(np.load(f / TOKENS_FILE))),
            TOKENS_FILE,
            "C-ordered",
        ),
    ],
)
def test_corrupt_store_is_refused_naming_the_file(store, damage, file, message):
    damage(store.directory)
    with pytest.raises(DamagedTokenStore, match=f"corrupt token store .*: {file} .*{message}") as caught:
        TokenStates.open(store.directory)
    assert caught.value.path == store.directory / file and isinstance(caught.value, ValueError)
    assert f"delete the folder {store.directory}" in str(caught.value)


def _garbage(path) -> None:
    path.write_bytes(np.random.default_rng(0).integers(0, 256, path.stat().st_size, dtype=np.uint8).tobytes())


def _swap(offsets: np.ndarray) -> np.ndarray:
    out = offsets.copy()
    out[3], out[4] = out[4], out[3]
    return out


def _truncate(path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 8)


def test_open_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        TokenStates.open(tmp_path / "nowhere")


def test_repr_and_empty_texts_without_special_tokens(enc, tmp_path):
    states = write_token_states(enc, ["", "hello world"], tmp_path / "e", include_special=False)
    assert states.lengths.tolist() == [0, 2] and states[0].shape == (0, 32)
    assert "texts=2" in repr(states) and "dim=32" in repr(states)
