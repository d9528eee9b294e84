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


# ---------------------------------------------------------------- the conditionals of all targets as one model

ALL_TARGETS = FlowConfig(n_transforms=2, hidden_features=16, rank=4, max_epochs=6, max_epochs_conditional=6,
                         patience=2, train_backbone=False, batch_conditionals=4)  # fmt: skip


def _mixed_pool(n: int = 300) -> dict[str, np.ndarray]:
    """Five models, three of width 6 and two of width 4 (two batches of targets): four of a common latent
    and "c", noise that tells nothing (its flows stop sooner)."""
    rng = np.random.default_rng(7)
    z = rng.standard_normal((n, 4))
    widths = {"a": 6, "b": 6, "c": 6, "d": 4, "e": 4}
    noise = {"a": 0.3, "b": 0.8, "c": 1.0, "d": 0.5, "e": 1.5}
    return {
        name: (
            (name != "c") * z @ rng.standard_normal((4, d)) + noise[name] * rng.standard_normal((n, d))
        ).astype(np.float32)
        for name, d in widths.items()
    }


def _assert_same_matrix(a, b, atol: float = 1e-4) -> None:
    ra, rb = (r.records.set_index(["source", "target"]).sort_index() for r in (a, b))
    assert list(ra["epochs"]) == list(rb["epochs"])
    pd.testing.assert_frame_equal(ra[NUMERIC], rb[NUMERIC], rtol=atol, atol=atol)
    for key in a.val_logp_cond:
        np.testing.assert_allclose(b.val_logp_cond[key], a.val_logp_cond[key], rtol=atol, atol=atol)


def test_all_target_batches_give_the_per_target_matrix():
    pool = _mixed_pool()
    per_target = sufficiency_matrix(pool, config=ALL_TARGETS, seed=3, device="cpu")
    events: list[dict] = []
    all_targets = sufficiency_matrix(
        pool, config=dataclasses.replace(ALL_TARGETS, batch_targets=5), seed=3, device="cpu",
        progress=events.append,
    )  # fmt: skip
    _assert_same_matrix(per_target, all_targets)
    # the flows stop at different epochs (the noisy source sooner): each keeps its own early stopping
    assert per_target.records["epochs"].nunique() > 1
    # 5 marginals, then one task for the targets of width 6 and one for those of width 4
    assert sum(e.get("worker") is not None for e in events) == 5 + 2
    assert len(events) == 5 + 20


def test_an_all_target_run_resumes_to_the_fresh_matrix(tmp_path):
    pool = _mixed_pool()
    config = dataclasses.replace(ALL_TARGETS, batch_targets=5)
    fresh = sufficiency_matrix(pool, config=config, seed=3, device="cpu")
    sufficiency_matrix(pool, config=config, seed=3, device="cpu", store_dir=tmp_path)
    # an interrupted run: some pairs of target "a", every pair of target "d" and one marginal not stored
    gone = [("b", "a"), ("c", "a"), *[(s, "d") for s in "abce"]]
    index = {name: i for i, name in enumerate(pool)}
    for source, target in gone:
        for path in (tmp_path / "pairs").glob(f"s{index[source]}_t{index[target]}.*"):
            path.unlink()
    for path in (tmp_path / "marginals").glob(f"t{index['e']}.*"):
        path.unlink()
    events: list[dict] = []
    resumed = sufficiency_matrix(
        pool, config=config, seed=3, device="cpu", store_dir=tmp_path, progress=events.append
    )
    trained = {(e["source"], e["target"]) for e in events if not e["resumed"]}
    assert trained == {*gone, (None, "e")}  # the stored units are kept, only the others trained
    _assert_same_matrix(fresh, resumed, atol=1e-5)
    pd.testing.assert_frame_equal(fresh.is_matrix, resumed.is_matrix, rtol=1e-5, atol=1e-5)


def test_a_failed_marginal_fails_the_pairs_of_its_batch(monkeypatch, tmp_path):
    from flare_core.analyses.sufficiency import flows

    pool = {k: v for k, v in _mixed_pool().items() if k in "abc"}
    config = dataclasses.replace(ALL_TARGETS, batch_targets=3)
    original = flows._fit_marginal
    calls: list[int] = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) >= 2:  # the marginals run in plan order: those of "b" and "c" fail
            raise FloatingPointError("no marginal")
        return original(*args, **kwargs)

    monkeypatch.setattr(flows, "_fit_marginal", flaky)
    result = sufficiency_matrix(pool, config=config, device="cpu", on_error="continue", store_dir=tmp_path)
    errors = result.failed.set_index(["source", "target"])["error"]
    assert errors[("a", "b")].startswith("the marginal of 'b' failed")
    assert errors[("a", "c")].startswith("batched with the pairs of 'b'")
    assert errors[("b", "c")].startswith("batched with the pairs of 'b'")  # recorded once, not twice
    assert len(errors) == 2 + 6 and result.is_matrix.isna().to_numpy().sum() == 3 + 6
    monkeypatch.setattr(flows, "_fit_marginal", original)
    resumed = sufficiency_matrix(pool, config=config, device="cpu", store_dir=tmp_path)
    assert resumed.failed.empty and np.isfinite(resumed.records["is_nats"]).all()


def test_across_targets_equals_each_target_alone_and_checks_its_groups():
    from flare_core.analyses.sufficiency._batched import (
        TargetGroup,
        fit_conditionals_across_targets,
        fit_conditionals_batched,
    )
    from flare_core.analyses.sufficiency.flows import FlowEstimator

    pool = _mixed_pool()
    config = ALL_TARGETS
    groups = []
    for t, target in enumerate("abc"):
        v = pool[target]
        marginal = FlowEstimator().fit_marginal(v[:250], v[250:], config, seed=t, device="cpu").model
        sources = [(pool[s][:250], pool[s][250:], 10 * t + k) for k, s in enumerate("abcde") if s != target]
        groups.append(TargetGroup(marginal, sources[: 2 + t], v[:250], v[250:]))
    together = fit_conditionals_across_targets(groups, config)
    assert [len(g) for g in together] == [2, 3, 4]
    for group, outcomes in zip(groups, together, strict=True):
        alone = fit_conditionals_batched(group.marginal, group.sources, group.v_train, group.v_val, config)
        for a, b in zip(alone, outcomes, strict=True):
            assert a.epochs == b.epochs and a.history == pytest.approx(b.history, abs=1e-5)
            np.testing.assert_allclose(b.logp_val, a.logp_val, rtol=1e-5, atol=1e-5)
    narrow = pool["d"]
    marginal_d = FlowEstimator().fit_marginal(narrow[:250], narrow[250:], config, device="cpu").model
    other = TargetGroup(marginal_d, [(pool["a"][:250], pool["a"][250:], 0)], narrow[:250], narrow[250:])
    with pytest.raises(ValueError, match="one width"):
        fit_conditionals_across_targets([groups[0], other], config)
    short = TargetGroup(groups[0].marginal, [(pool["b"][:200], pool["b"][200:], 0)], *_v(pool["a"], 200))
    with pytest.raises(ValueError, match="same training and validation rows"):
        fit_conditionals_across_targets([groups[1], short], config)
    with pytest.raises(ValueError, match="at least one source"):
        fit_conditionals_across_targets([TargetGroup(marginal_d, [], narrow[:250], narrow[250:])], config)
    with pytest.raises(ValueError, match="batch_targets > 1 needs flow='maf'"):
        FlowConfig(flow="nsf", batch_targets=2)


def _v(v: np.ndarray, split: int) -> tuple[np.ndarray, np.ndarray]:
    return v[:split], v[split:]
