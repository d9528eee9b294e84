"""Streamed .npy files, block reads and atomic folders (flare_core.store.atomic)."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.store import atomic


def _leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".tmp-"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_known_shape_reads_back_with_np_load_and_memmap(tmp_path, dtype):
    data = np.arange(7 * 3 * 2).reshape(7, 3, 2).astype(dtype)
    path = tmp_path / "a.npy"
    with atomic.open_npy_writer(path, (7, 3, 2), dtype) as out:
        assert not path.exists(), "the file must appear only when complete"
        for start in (0, 3, 4):
            out.write(data[start : {0: 3, 3: 4, 4: 7}[start]])
        out.write(data[:0])  # an empty block is fine
        assert out.rows == 7
    np.testing.assert_array_equal(np.load(path), data)
    mapped = np.load(path, mmap_mode="r")
    assert mapped.dtype == dtype and mapped.shape == (7, 3, 2)
    np.testing.assert_array_equal(mapped, data)
    assert _leftovers(tmp_path) == []
    # the header is a whole number of 64-byte blocks, so rows are aligned in the file
    with open(path, "rb") as fh:
        np.lib.format.read_magic(fh)
        np.lib.format.read_array_header_1_0(fh)
        assert fh.tell() % 64 == 0


def test_open_row_count_is_fixed_at_the_end(tmp_path):
    path = tmp_path / "rows.npy"
    blocks = [np.full((n, 4), n, dtype=np.float32) for n in (5, 0, 123, 1)]
    with atomic.open_npy_writer(path, (None, 4), np.float32) as out:
        for block in blocks:
            out.write(block)
    np.testing.assert_array_equal(np.load(path, mmap_mode="r"), np.concatenate(blocks))
    with atomic.open_npy_writer(tmp_path / "empty.npy", (None, 4), np.float32):
        pass
    assert np.load(tmp_path / "empty.npy").shape == (0, 4)


def test_one_dimensional_and_casts(tmp_path):
    path = tmp_path / "v.npy"
    with atomic.open_npy_writer(path, (None,), np.float16) as out:
        out.write(np.array([0.5, 1.5], dtype=np.float64))  # same kind: cast
    np.testing.assert_array_equal(np.load(path), np.array([0.5, 1.5], dtype=np.float16))


def test_wrong_row_count_is_refused_and_nothing_is_left(tmp_path):
    path = tmp_path / "a.npy"
    with (
        pytest.raises(ValueError, match="2 rows written to an array of 3 rows"),
        atomic.open_npy_writer(path, (3, 2), np.float32) as out,
    ):
        out.write(np.zeros((2, 2)))
    assert not path.exists() and _leftovers(tmp_path) == []
    with (
        pytest.raises(ValueError, match="4 rows written to an array of 3 rows"),
        atomic.open_npy_writer(path, (3, 2), np.float32) as out,
    ):
        out.write(np.zeros((2, 2)))
        out.write(np.zeros((2, 2)))
    assert not path.exists() and _leftovers(tmp_path) == []


def test_bad_blocks_are_refused(tmp_path):
    with atomic.open_npy_writer(tmp_path / "a.npy", (None, 2), np.float32) as out:
        for bad, message in [
            (np.zeros((2, 3)), "do not fit"),
            (np.zeros(2), "do not fit"),
            (np.zeros((1, 2), dtype=complex), "cannot store complex128"),
        ]:
            with pytest.raises(ValueError, match=message):
                out.write(bad)
        out.write(np.ones((1, 2)))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.ones((1, 2), dtype=np.float32))
    with atomic.open_npy_writer(tmp_path / "i.npy", (None, 2), np.int32) as out:
        with pytest.raises(ValueError, match="cannot store float64"):
            out.write(np.zeros((1, 2)))
        out.write(np.zeros((1, 2), dtype=np.int8))
    np.testing.assert_array_equal(np.load(tmp_path / "i.npy"), np.zeros((1, 2), dtype=np.int32))


@pytest.mark.parametrize("shape", [(), [2, -1], (2, None), "ab", (2.0, 3)])
def test_bad_shapes_and_dtypes(tmp_path, shape):
    with (
        pytest.raises(ValueError, match="shape"),
        atomic.open_npy_writer(tmp_path / "a.npy", shape, np.float32),
    ):
        pass
    with (
        pytest.raises(ValueError, match="numeric dtype"),
        atomic.open_npy_writer(tmp_path / "a.npy", (2,), object),
    ):
        pass
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_error_removes_the_temporary_file_and_keeps_the_old_one(tmp_path, error):
    path = tmp_path / "a.npy"
    atomic.write_npy(path, np.arange(3.0))
    with pytest.raises(error), atomic.open_npy_writer(path, (None,), np.float64) as out:
        out.write(np.zeros(1000))
        raise error()
    np.testing.assert_array_equal(np.load(path), np.arange(3.0))
    assert _leftovers(tmp_path) == []


def test_npy_blocks_reads_whole_rows(tmp_path):
    data = np.random.default_rng(0).normal(size=(1000, 7)).astype(np.float32)
    path = tmp_path / "a.npy"
    np.save(path, data)
    blocks = list(atomic.npy_blocks(path, max_bytes=7 * 4 * 300 + 5))
    assert [len(b) for b in blocks] == [300, 300, 300, 100]
    np.testing.assert_array_equal(np.concatenate(blocks), data)
    assert len(list(atomic.npy_blocks(path, max_bytes=1))) == 1000  # one row at least
    np.save(tmp_path / "f.npy", np.asfortranarray(data))
    with pytest.raises(ValueError, match="C-ordered"):
        list(atomic.npy_blocks(tmp_path / "f.npy"))
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 10)
    with pytest.raises(ValueError, match="ends before row 999"):
        list(atomic.npy_blocks(path))


def test_atomic_dir(tmp_path):
    target = tmp_path / "store"
    with atomic.atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
        assert not target.exists()
    assert (target / "a.txt").read_text() == "one"
    with pytest.raises(FileExistsError, match="not empty"), atomic.atomic_dir(target):
        pass
    with pytest.raises(KeyboardInterrupt), atomic.atomic_dir(target, overwrite=True) as tmp:
        (tmp / "b.txt").write_text("two")
        raise KeyboardInterrupt
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    with atomic.atomic_dir(target, overwrite=True) as tmp:
        (tmp / "b.txt").write_text("two")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    (tmp_path / "file").write_text("x")
    with (
        pytest.raises(FileExistsError, match="not a folder"),
        atomic.atomic_dir(tmp_path / "file", overwrite=True),
    ):
        pass


def test_copy_file(tmp_path):
    atomic.write_npy(tmp_path / "a.npy", np.arange(5))
    atomic.copy_file(tmp_path / "a.npy", tmp_path / "sub" / "b.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "sub" / "b.npy"), np.arange(5))
