"""Conditional flows of one target trained as one batched (vmapped) model equal those trained one by one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix
from flare_core.analyses.sufficiency.result import RECORD_COLUMNS
from tests.analyses.sufficiency._data import gaussian_pair

NUMERIC = [c for c in RECORD_COLUMNS if c not in ("source", "target", "seconds", "epochs")]


def _pool() -> dict[str, np.ndarray]:
    """A target and sources of different widths and quality (so A is padded and epochs differ)."""
    u, v, _ = gaussian_pair(n=600, d=6, sigma=0.5, seed=4)
    rng = np.random.default_rng(4)
    return {
        "v": v,
        "u": u,
        "u noisy wide": np.hstack([u + rng.standard_normal(u.shape), rng.standard_normal((600, 5))]),
        "noise": rng.standard_normal((600, 3)).astype(np.float32),
    }


@pytest.mark.parametrize("train_backbone", [True, False])
def test_batched_conditionals_equal_one_by_one(train_backbone):
    pool = _pool()
    config = FlowConfig(
        n_transforms=2,
        hidden_features=16,
        rank=4,
        max_epochs=40,
        max_epochs_conditional=8,
        patience=2,
        train_backbone=train_backbone,
    )
    kwargs = dict(sources=["u", "u noisy wide", "noise"], targets=["v"], seed=1, device="cpu")
    alone = sufficiency_matrix(pool, config=config, **kwargs)
    batched = sufficiency_matrix(pool, config=dataclasses.replace(config, batch_conditionals=3), **kwargs)
    a = alone.records.set_index("source").loc[["u", "u noisy wide", "noise"]]
    b = batched.records.set_index("source").loc[["u", "u noisy wide", "noise"]]
    # each flow keeps its own early stopping: the same epochs as alone (without backbone training the
    # noise source stops after 2 epochs while the others run all 8)
    assert list(a["epochs"]) == list(b["epochs"])
    if not train_backbone:
        assert b.loc["noise", "epochs"] < b.loc["u", "epochs"]
    # batched matrix products may round differently from single ones (on this CPU they were identical)
    pd.testing.assert_frame_equal(a[NUMERIC], b[NUMERIC], rtol=1e-4, atol=1e-4)
    for key in alone.val_logp_cond:
        np.testing.assert_allclose(batched.val_logp_cond[key], alone.val_logp_cond[key], rtol=1e-4, atol=1e-4)
    assert b.loc["u", "is_nats"] > b.loc["u noisy wide", "is_nats"] > b.loc["noise", "is_nats"]


def test_batched_conditionals_resume_and_validation(tmp_path):
    pool = _pool()
    config = FlowConfig(n_transforms=1, hidden_features=8, rank=4, max_epochs=2, max_epochs_conditional=2,
                        patience=1, batch_conditionals=2)  # fmt: skip
    first = sufficiency_matrix(pool, config=config, seed=2, store_dir=tmp_path)
    events = []
    again = sufficiency_matrix(pool, config=config, seed=2, store_dir=tmp_path, progress=events.append)
    assert all(e["resumed"] for e in events) and len(events) == 4 + 12
    pd.testing.assert_frame_equal(first.is_matrix, again.is_matrix, check_exact=True)
    with pytest.raises(ValueError, match="batch_conditionals must be a positive integer"):
        FlowConfig(batch_conditionals=0)
    with pytest.raises(ValueError, match="needs flow='maf'"):
        FlowConfig(flow="nsf", batch_conditionals=2)


def test_batched_outcomes_are_each_sources_own_flow():
    from flare_core.analyses.sufficiency._batched import fit_conditionals_batched
    from flare_core.analyses.sufficiency.flows import FlowEstimator

    pool = _pool()
    config = FlowConfig(n_transforms=1, hidden_features=8, rank=4, max_epochs=2, max_epochs_conditional=2,
                        patience=1, batch_conditionals=2)  # fmt: skip
    v = pool["v"]
    marginal = FlowEstimator().fit_marginal(v[:500], v[500:], config, seed=0, device="cpu").model
    sources = [(pool[name][:500], pool[name][500:], k) for k, name in enumerate(["noise", "u noisy wide"])]
    outcomes = fit_conditionals_batched(marginal, sources, v[:500], v[500:], config)
    for (_, u_val, _), outcome in zip(sources, outcomes, strict=True):
        # the narrow source's flow takes its own width again (A was padded to 11 columns while training)
        with torch.no_grad():
            logp = outcome.model.log_prob(
                torch.as_tensor(v[500:]), context=torch.as_tensor(u_val, dtype=torch.float32)
            )
        np.testing.assert_allclose(logp.numpy(), outcome.logp_val, rtol=1e-5, atol=1e-5)
