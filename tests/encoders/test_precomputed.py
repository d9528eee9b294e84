"""load_precomputed: .npy / Parquet uploads, their checks, and the refusal to unpickle."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from flare_core.encoders import PrecomputedEncoder, load_precomputed

from ._helpers import assert_shape

RNG = np.random.default_rng(0)
GOOD = RNG.normal(size=(5, 3))


def _npy_bytes(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def test_good_npy_path_and_bytes(tmp_path):
    path = tmp_path / "emb.npy"
    np.save(path, GOOD)
    for source in (path, str(path), path.read_bytes()):
        out = load_precomputed(source, n_rows=5, name="mine")
        assert out.dtype == np.float32
        assert_shape(out, (5, 3))
        np.testing.assert_allclose(out, GOOD, rtol=1e-6)
    ints = load_precomputed(_npy_bytes(np.arange(10, dtype=np.int64).reshape(5, 2)), n_rows=5, name="ints")
    assert ints.dtype == np.float32 and ints.shape == (5, 2)


def test_good_parquet_numeric_columns_and_list_column(tmp_path):
    path = tmp_path / "emb.parquet"
    pd.DataFrame(GOOD, columns=["a", "b", "c"]).to_parquet(path)
    np.testing.assert_allclose(load_precomputed(path, n_rows=5, name="cols"), GOOD, rtol=1e-6)
    listed = tmp_path / "list.parquet"
    pd.DataFrame({"embedding": [row.tolist() for row in GOOD]}).to_parquet(listed)
    out = load_precomputed(listed.read_bytes(), n_rows=5, name="list")
    assert_shape(out, (5, 3))
    np.testing.assert_allclose(out, GOOD, rtol=1e-6)


@pytest.mark.parametrize(
    ("array", "n_rows", "message"),
    [
        (GOOD, 4, "has 5 rows but the corpus has 4"),
        (np.where(np.eye(5, 3) > 0, np.nan, GOOD), 5, "NaN"),
        (np.where(np.eye(5, 3) > 0, np.inf, GOOD), 5, "infinite"),
        (GOOD[:, 0], 5, "2-D"),
        (GOOD[None], 5, "2-D"),
        (np.zeros((5, 0)), 5, "0 dimensions"),
        (np.array([["a", "b"]] * 5), 5, "numeric"),
        (np.ones((5, 2), dtype=bool), 5, "numeric"),
        (np.full((5, 2), 1e39), 5, "float32 range"),
    ],
)
def test_bad_arrays(array, n_rows, message):
    with pytest.raises(ValueError, match=message) as info:
        load_precomputed(_npy_bytes(array), n_rows=n_rows, name="upload.npy")
    assert "upload.npy" in str(info.value)


def test_pickled_object_array_is_refused(tmp_path):
    obj = np.empty((5, 2), dtype=object)
    obj[:] = 1.0
    path = tmp_path / "pickled.npy"
    np.save(path, obj, allow_pickle=True)
    for source in (path, path.read_bytes()):
        with pytest.raises(ValueError, match="pickles are never loaded"):
            load_precomputed(source, n_rows=5, name="pickled.npy")


def test_bad_parquet_and_unknown_formats(tmp_path):
    path = tmp_path / "mixed.parquet"
    pd.DataFrame({"id": list("abcde"), "x": GOOD[:, 0]}).to_parquet(path)
    with pytest.raises(ValueError, match="non-numeric: id"):
        load_precomputed(path, n_rows=5, name="mixed")
    ragged = tmp_path / "ragged.parquet"
    pd.DataFrame({"embedding": [[1.0, 2.0]] * 4 + [[1.0]]}).to_parquet(ragged)
    with pytest.raises(ValueError, match="different lengths"):
        load_precomputed(ragged, n_rows=5, name="ragged")
    nulls = tmp_path / "nulls.parquet"
    pd.DataFrame({"x": [1.0, None, 2.0, 3.0, 4.0]}).to_parquet(nulls)
    with pytest.raises(ValueError, match="NaN"):
        load_precomputed(nulls, n_rows=5, name="nulls")
    with pytest.raises(ValueError, match="not a .npy or Parquet"):
        load_precomputed(b"a,b\n1,2\n", n_rows=1, name="csv")
    with pytest.raises(ValueError, match="no such file"):
        load_precomputed(tmp_path / "missing.npy", n_rows=1, name="missing")
    with pytest.raises(ValueError, match="n_rows"):
        load_precomputed(_npy_bytes(GOOD), n_rows=0, name="zero")


def test_precomputed_encoder():
    enc = PrecomputedEncoder("uploaded", GOOD)
    assert enc.spec.kind == "precomputed" and enc.spec.dim == 3 and enc.spec.source == "precomputed"
    out = enc.encode([f"t{i}" for i in range(5)])
    np.testing.assert_allclose(out, GOOD, rtol=1e-6)
    assert PrecomputedEncoder("again", GOOD).spec.revision == enc.spec.revision
    with pytest.raises(ValueError, match="5 rows"):
        enc.encode(["only one"])
