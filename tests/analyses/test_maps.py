"""2-D maps of embeddings: the sampled rows, the PCA fallback and the UMAP layout."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.analyses.maps import embedding_map, sample_rows


def test_sample_rows_keeps_everything_below_the_limit_and_samples_above():
    np.testing.assert_array_equal(sample_rows(5, 10), np.arange(5))
    picked = sample_rows(1000, 50, seed=3)
    assert len(picked) == 50 and len(set(picked.tolist())) == 50
    assert (np.diff(picked) > 0).all() and picked.min() >= 0 and picked.max() < 1000
    np.testing.assert_array_equal(picked, sample_rows(1000, 50, seed=3))
    assert not np.array_equal(picked, sample_rows(1000, 50, seed=4))


def test_few_rows_fall_back_to_the_first_two_principal_components():
    x = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]])
    frame = embedding_map(x)
    assert list(frame.columns) == ["row", "x", "y"] and list(frame["row"]) == [0, 1, 2, 3]
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    expected = centred @ vt[:2].T
    np.testing.assert_allclose(frame[["x", "y"]].to_numpy(), expected, atol=1e-6)


def test_two_rows_of_one_dimension_get_a_zero_second_axis():
    frame = embedding_map(np.array([[1.0], [3.0]]))
    np.testing.assert_allclose(frame["x"].abs(), [1.0, 1.0], atol=1e-6)
    assert (frame["y"] == 0).all()


def test_umap_keeps_separated_groups_apart_and_is_seeded():
    rng = np.random.default_rng(0)
    centres = np.zeros((2, 16))
    centres[1, 0] = 1.0  # two directions: cosine distance separates the groups
    centres[0, 1] = 1.0
    x = np.concatenate([c + 0.05 * rng.standard_normal((40, 16)) for c in centres]).astype(np.float32)
    frame = embedding_map(x, seed=1, n_neighbors=10)
    coords = frame[["x", "y"]].to_numpy()
    group = frame["row"].to_numpy() >= 40
    a, b = coords[~group], coords[group]
    gap = np.linalg.norm(a.mean(axis=0) - b.mean(axis=0))
    spread = max(
        np.linalg.norm(a - a.mean(axis=0), axis=1).max(), np.linalg.norm(b - b.mean(axis=0), axis=1).max()
    )
    assert gap > 2 * spread
    again = embedding_map(x, seed=1, n_neighbors=10)
    np.testing.assert_array_equal(again[["x", "y"]].to_numpy(), coords)


def test_large_inputs_are_sampled_to_max_points():
    x = np.random.default_rng(2).standard_normal((300, 8)).astype(np.float32)
    frame = embedding_map(x, max_points=60, seed=0)
    assert len(frame) == 60
    np.testing.assert_array_equal(frame["row"].to_numpy(), sample_rows(300, 60, seed=0))
    assert np.isfinite(frame[["x", "y"]].to_numpy()).all()


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((1, 3)), np.zeros((2, 2, 2))])
def test_bad_shapes_are_refused(bad):
    with pytest.raises(ValueError, match="2-D array with at least 2 rows"):
        embedding_map(bad)


@pytest.mark.slow
def test_a_new_process_draws_the_same_map_from_umaps_compiled_code_kept_on_disk(tmp_path):
    """Every compiled function of umap-learn is kept on disk, and a map drawn with that code in a new
    process is the one drawn with freshly compiled code, to the last bit."""
    import subprocess
    import sys
    from pathlib import Path

    from numba.core.dispatcher import Dispatcher

    from flare_core.analyses import maps

    maps._keep_umap_compiled()
    import umap.umap_

    dispatchers = [v for v in vars(umap.umap_).values() if isinstance(v, Dispatcher)]
    assert dispatchers and all(type(d._cache).__name__ == "FunctionCache" for d in dispatchers)
    script = (
        "import sys, numpy as np\n"
        "import flare_core.analyses.maps as m\n"
        "if sys.argv[1] == 'fresh': m._keep_umap_compiled = lambda: 0\n"
        "x = np.random.default_rng(1).normal(size=(60, 12)).astype('float32')\n"
        "np.save(sys.argv[2], m.embedding_map(x, seed=0)[['x', 'y']].to_numpy())\n"
    )
    root = Path(__file__).resolve().parents[2]
    for how in ("fresh", "kept", "kept"):
        subprocess.run(
            [sys.executable, "-c", script, how, str(tmp_path / f"{how}.npy")], check=True, cwd=root
        )
    np.testing.assert_array_equal(np.load(tmp_path / "fresh.npy"), np.load(tmp_path / "kept.npy"))
