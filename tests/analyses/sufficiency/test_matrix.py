"""Bookkeeping of the sufficiency matrix: sharing, resume, seeds, persistence, validation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from flare_core.analyses.sufficiency import (
    FlowConfig,
    GMMConfig,
    SufficiencyResult,
    sufficiency_matrix,
)
from flare_core.analyses.sufficiency import flows as flows_module
from flare_core.analyses.sufficiency.result import RECORD_COLUMNS
from flare_core.errors import Cancelled
from tests.properties import assert_finite, assert_shape

TINY = FlowConfig(
    n_transforms=1, hidden_features=8, rank=4, max_epochs=3, max_epochs_conditional=3, patience=2
)
NUMERIC = [c for c in RECORD_COLUMNS if c not in ("source", "target", "seconds")]


def _pool(n: int = 120, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    return {
        "org/model a": z @ rng.standard_normal((3, 4)) + 0.3 * rng.standard_normal((n, 4)),
        "b": np.tanh(z @ rng.standard_normal((3, 3))) + 0.3 * rng.standard_normal((n, 3)),
        "c c": rng.standard_normal((n, 2)) + 5.0,
    }


def _assert_same_numbers(a: SufficiencyResult, b: SufficiencyResult) -> None:
    pd.testing.assert_frame_equal(a.is_matrix, b.is_matrix, check_exact=True)
    pd.testing.assert_frame_equal(a.records[NUMERIC], b.records[NUMERIC], check_exact=True)
    assert list(a.val_logp_cond) == list(b.val_logp_cond)
    for key in a.val_logp_cond:
        np.testing.assert_array_equal(a.val_logp_cond[key], b.val_logp_cond[key])
    for key in a.val_logp_marg:
        np.testing.assert_array_equal(a.val_logp_marg[key], b.val_logp_marg[key])


def test_matrix_shape_and_records():
    result = sufficiency_matrix(_pool(), config=TINY, device="cpu")
    names = list(_pool())
    assert result.names == names and result.sources == names
    assert_shape(result.is_matrix.to_numpy(), (3, 3))
    assert np.isnan(np.diag(result.is_matrix.to_numpy())).all()
    assert_finite(result.records[NUMERIC].to_numpy(dtype=float))
    assert len(result.records) == 6
    n_val = len(result.val_idx)
    assert n_val == 12 and len(result.train_idx) == 108
    assert not set(result.val_idx) & set(result.train_idx)
    for arr in result.val_logp_cond.values():
        assert_shape(arr, (n_val,))
    row = result.records.iloc[0]
    assert row["is_nats"] == pytest.approx(row["nll_marg_val"] - row["nll_cond_val"])
    assert row["is_per_dim"] == pytest.approx(row["is_nats"] / row["d_target"])
    np.testing.assert_allclose(
        row["nll_cond_val"], -result.val_logp_cond[(row["source"], row["target"])].mean(), rtol=1e-12
    )


def test_marginal_trained_once_per_target(monkeypatch):
    calls = []
    original = flows_module._fit_marginal

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(flows_module, "_fit_marginal", counting)
    events = []
    result = sufficiency_matrix(_pool(), config=TINY, device="cpu", progress=events.append)
    assert len(calls) == 3
    assert [e["stage"] for e in events].count("marginal") == 3
    assert [e["done"] for e in events] == list(range(1, 10))
    assert all(e["total"] == 9 for e in events)
    assert len(result.marginals) == 3


def test_references_are_targets_only():
    result = sufficiency_matrix(_pool(), config=TINY, sources=["b"], device="cpu")
    assert list(result.is_matrix.index) == ["b"]
    assert list(result.is_matrix.columns) == list(_pool())
    assert len(result.records) == 2


@pytest.mark.parametrize(
    "estimator,config", [("flow", TINY), ("gmm", GMMConfig(max_epochs=2, max_epochs_conditional=2))]
)
def test_resume_after_crash_gives_identical_numbers(tmp_path, estimator, config):
    pool = _pool()
    fresh = sufficiency_matrix(pool, estimator=estimator, config=config, device="cpu")

    # crash 1: cancellation after 4 units
    events = []
    with pytest.raises(Cancelled):
        sufficiency_matrix(
            pool,
            estimator=estimator,
            config=config,
            device="cpu",
            store_dir=tmp_path,
            progress=events.append,
            should_stop=lambda: len(events) >= 4,
        )
    assert len(events) == 4

    # crash 2: an exception out of the progress callback after 2 more units
    def boom(event):
        if not event["resumed"] and event["done"] >= 6:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated crash"):
        sufficiency_matrix(
            pool, estimator=estimator, config=config, device="cpu", store_dir=tmp_path, progress=boom
        )

    events = []
    resumed = sufficiency_matrix(
        pool, estimator=estimator, config=config, device="cpu", store_dir=tmp_path, progress=events.append
    )
    assert sum(e["resumed"] for e in events) == 6
    _assert_same_numbers(fresh, resumed)


def test_store_refuses_a_different_run(tmp_path):
    sufficiency_matrix(_pool(), config=TINY, device="cpu", store_dir=tmp_path, sources=["b"])
    with pytest.raises(ValueError, match="different run"):
        sufficiency_matrix(_pool(), config=TINY, seed=1, device="cpu", store_dir=tmp_path)
    with pytest.raises(ValueError, match="different run"):
        sufficiency_matrix(_pool(seed=3), config=TINY, device="cpu", store_dir=tmp_path)


def test_store_of_an_earlier_flow_config_resumes(tmp_path):
    import json

    first = sufficiency_matrix(_pool(), config=TINY, device="cpu", store_dir=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for key in ("autocast", "batch_conditionals"):  # fields a store written before they existed lacks
        del manifest["config"][key]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    again = sufficiency_matrix(_pool(), config=TINY, device="cpu", store_dir=tmp_path)
    _assert_same_numbers(first, again)
    with pytest.raises(
        ValueError, match="differs in: config"
    ):  # a value other than the default is another run
        sufficiency_matrix(_pool(), config=dataclasses.replace(TINY, autocast=True), store_dir=tmp_path)


def test_seed_reproducible_and_different_seed_differs():
    a = sufficiency_matrix(_pool(), config=TINY, seed=4, device="cpu")
    b = sufficiency_matrix(_pool(), config=TINY, seed=4, device="cpu")
    c = sufficiency_matrix(_pool(), config=TINY, seed=5, device="cpu")
    _assert_same_numbers(a, b)
    assert not np.array_equal(a.val_idx, c.val_idx)
    assert not np.allclose(a.records["is_nats"], c.records["is_nats"])


def test_save_load_roundtrip(tmp_path):
    result = sufficiency_matrix(_pool(), config=TINY, sources=["org/model a", "b"], device="cpu")
    result.save(tmp_path / "res")
    loaded = SufficiencyResult.load(tmp_path / "res")
    _assert_same_numbers(result, loaded)
    assert loaded.names == result.names and loaded.sources == result.sources
    assert loaded.dims == result.dims and loaded.config == result.config and loaded.seed == result.seed
    np.testing.assert_array_equal(loaded.val_idx, result.val_idx)
    pd.testing.assert_frame_equal(loaded.marginals, result.marginals)
    assert not list((tmp_path / "res").glob("*.pkl"))
    records = result.records
    assert (records["is_raw_nats"] <= records["is_nats"] + 1e-9).all()
    np.testing.assert_allclose(records["is_raw_per_dim"], records["is_raw_nats"] / records["d_target"])
    # a result written before the raw figure was recorded reads back with NaN in its place
    old = records.drop(columns=["is_raw_nats", "is_raw_per_dim"])
    old.to_parquet(tmp_path / "res" / "records.parquet")
    again = SufficiencyResult.load(tmp_path / "res").records
    assert again["is_raw_nats"].isna().all() and again["is_nats"].tolist() == records["is_nats"].tolist()


def test_gmm_evaluate_on_train_uses_every_row():
    result = sufficiency_matrix(
        _pool(), estimator="gmm", config=GMMConfig.emir(), sources=["b"], device="cpu"
    )
    assert len(result.val_idx) == len(result.train_idx) == 120
    rec = result.records.iloc[0]
    assert rec["nll_cond_val"] == pytest.approx(rec["nll_cond_train"])


def test_input_validation():
    pool = _pool()
    with pytest.raises(ValueError, match="at least 2 embeddings"):
        sufficiency_matrix({"a": pool["b"]})
    with pytest.raises(ValueError, match="same rows"):
        sufficiency_matrix({"a": pool["b"], "x": pool["b"][:50]})
    bad = pool["b"].copy()
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        sufficiency_matrix({"a": pool["b"], "x": bad})
    with pytest.raises(ValueError, match="2-D"):
        sufficiency_matrix({"a": pool["b"], "x": pool["b"][:, 0]})
    with pytest.raises(ValueError, match="estimator must be one of"):
        sufficiency_matrix(pool, estimator="knn")
    with pytest.raises(ValueError, match="needs a GMMConfig"):
        sufficiency_matrix(pool, estimator="gmm", config=TINY)
    with pytest.raises(ValueError, match="not in embeddings"):
        sufficiency_matrix(pool, sources=["nope"])
    with pytest.raises(ValueError, match="val_fraction"):
        sufficiency_matrix(pool, val_fraction=1.5)
    with pytest.raises(ValueError, match="at least 2 of each"):
        sufficiency_matrix({"a": pool["b"][:5], "x": pool["b"][:5]}, val_fraction=0.1)


def test_whitened_matrix_streams_memory_mapped_arrays_like_in_memory_ones(tmp_path):
    from flare_core.analyses.sufficiency import GMMConfig, SufficiencyResult, sufficiency_matrix

    rng = np.random.default_rng(0)
    base = rng.normal(size=(300, 6))
    pool = {"a": base @ rng.normal(size=(6, 20)), "b": base[:, :4] @ rng.normal(size=(4, 12))}
    paths = {}
    for name, x in pool.items():
        np.save(tmp_path / f"{name}.npy", x.astype(np.float32))
        paths[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    config = GMMConfig(max_epochs=2, max_epochs_conditional=2)
    kwargs = dict(estimator="gmm", config=config, device="cpu", max_dims=5)
    memory = sufficiency_matrix({k: np.asarray(v) for k, v in paths.items()}, stream=False, **kwargs)
    streamed = sufficiency_matrix(paths, stream=True, **kwargs)
    assert memory.dims == streamed.dims == {"a": 5, "b": 4}  # b has rank 4
    np.testing.assert_allclose(memory.is_matrix.to_numpy(), streamed.is_matrix.to_numpy(), atol=1e-4)
    memory.save(tmp_path / "result")
    loaded = SufficiencyResult.load(tmp_path / "result")
    assert (loaded.max_dims, loaded.raw_dims, loaded.dims) == (5, {"a": 20, "b": 12}, {"a": 5, "b": 4})
