"""The units of a sufficiency matrix and the task each runs.

A target's :class:`MarginalUnit` comes first; each pair's :class:`ConditionalUnit` (or, with
``batch_conditionals`` > 1, a :class:`ConditionalGroupUnit` of several sources of one target) requires
it; with ``batch_targets`` > 1 a :class:`ConditionalBatchUnit` trains a group of sources of each of
several targets of one width together and requires each of their marginals. Each task is a pure
function of the standardised arrays, the config and its seeds, so it computes the same numbers in any
process, on any executor.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from flare_core.analyses.sufficiency.registry import get_estimator
from flare_core.compute.scheduler import Unit
from flare_core.device import pick_device


@dataclass(frozen=True)
class MarginalUnit(Unit):
    """Train the marginal density of ``target``."""

    target: str


@dataclass(frozen=True)
class ConditionalUnit(Unit):
    """Train the conditional density of ``target`` given ``source``; requires the target's marginal."""

    source: str
    target: str

    def requires(self) -> tuple[Unit, ...]:
        return (MarginalUnit(self.target),)


@dataclass(frozen=True)
class ConditionalGroupUnit(Unit):
    """Train the conditionals of ``target`` given each of ``sources`` as one batched model (flows)."""

    target: str
    sources: tuple[str, ...]

    def requires(self) -> tuple[Unit, ...]:
        return (MarginalUnit(self.target),)


@dataclass(frozen=True)
class ConditionalBatchUnit(Unit):
    """Train the conditionals of several targets (each ``(target, sources)`` of ``groups``: the target
    given each of its sources) as one batched model (flows); requires every target's marginal."""

    groups: tuple[tuple[str, tuple[str, ...]], ...]

    def requires(self) -> tuple[Unit, ...]:
        return tuple(MarginalUnit(target) for target, _ in self.groups)


def _task_device(device: str | torch.device | None) -> torch.device:
    return device if isinstance(device, torch.device) else pick_device(device)


def _quiet_readonly_arrays() -> None:
    """Arrays shared through an object store are read-only; torch warns when it wraps them."""
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


def _fit_summary(outcome: Any) -> dict[str, Any]:
    return {
        "nll_train": outcome.nll_train,
        "nll_val": outcome.nll_val,
        "epochs": outcome.epochs,
        "seconds": outcome.seconds,
        "logp_val": outcome.logp_val,
        "raw_nll_val": outcome.raw_nll_val,
    }


def marginal_task(
    estimator: str,
    config: Any,
    v_train: np.ndarray,
    v_val: np.ndarray,
    seed: int,
    device: str | torch.device | None,
) -> dict[str, Any]:
    """Train the marginal of one target: a pure function of its arguments (any process, any executor).

    ``v_train`` (n_train, d_v), ``v_val`` (n_val, d_v) are standardised. Returns the fit summary
    (``logp_val`` (n_val,) float64) and the ``state`` the conditionals start from (CPU tensors, or None
    for estimators whose conditionals do not use the marginal).
    """
    _quiet_readonly_arrays()
    est = get_estimator(estimator)
    outcome = est._fit_marginal(v_train, v_val, config, seed, _task_device(device))
    return {**_fit_summary(outcome), "state": est.marginal_weights(outcome.model)}


def conditional_task(
    estimator: str,
    config: Any,
    u_train: np.ndarray,
    u_val: np.ndarray,
    v_train: np.ndarray,
    v_val: np.ndarray,
    marginal_state: dict[str, torch.Tensor] | None,
    d_target: int,
    marg_seed: int,
    pair_seed: int,
    device: str | torch.device | None,
) -> dict[str, Any]:
    """Train the conditional of one pair: a pure function of its arguments (any process, any executor).

    ``u_*`` (n, d_u) and ``v_*`` (n, d_v) are standardised and row-aligned. Estimators that start from
    the marginal rebuild it from ``marginal_state`` (bit-identical to the trained one). Returns the fit
    summary.
    """
    _quiet_readonly_arrays()
    est = get_estimator(estimator)
    dev = _task_device(device)
    marginal = est.restore_marginal(marginal_state, d_target, config, marg_seed, dev)
    outcome = est._fit_conditional(u_train, v_train, u_val, v_val, config, pair_seed, dev, marginal)
    return _fit_summary(outcome)


def conditional_group_task(
    estimator: str,
    config: Any,
    v_train: np.ndarray,
    v_val: np.ndarray,
    marginal_state: dict[str, torch.Tensor] | None,
    d_target: int,
    marg_seed: int,
    pair_seeds: list[int],
    device: str | torch.device | None,
    *sources: Any,
) -> list[dict[str, Any]]:
    """Train the conditionals of several pairs of one target together (``Estimator.fit_conditional_group``).

    ``sources`` is ``u_train_1, u_val_1, u_train_2, u_val_2, ...`` ((n, d_u) each; flat, so that a
    remote executor resolves every shared array), one pair per seed of ``pair_seeds``. Returns one fit
    summary per pair, in order.
    """
    _quiet_readonly_arrays()
    if len(sources) != 2 * len(pair_seeds):
        raise ValueError(f"expected {2 * len(pair_seeds)} source arrays, got {len(sources)}")
    est = get_estimator(estimator)
    dev = _task_device(device)
    marginal = est.restore_marginal(marginal_state, d_target, config, marg_seed, dev)
    triples = [(sources[2 * k], sources[2 * k + 1], seed) for k, seed in enumerate(pair_seeds)]
    outcomes = est.fit_conditional_group(marginal, triples, v_train, v_val, config)
    return [_fit_summary(outcome) for outcome in outcomes]


def conditional_batch_task(
    estimator: str,
    config: Any,
    layout: list[tuple[int, int, list[int]]],
    device: str | torch.device | None,
    *arrays: Any,
) -> list[list[dict[str, Any]]]:
    """Train the conditionals of several targets together (``Estimator.fit_conditional_batch``).

    ``layout`` holds one ``(d_target, marg_seed, pair_seeds)`` per target; ``arrays`` is, target after
    target, ``v_train, v_val, marginal_state`` and then ``u_train_k, u_val_k`` per pair seed (flat, so
    that a remote executor resolves every shared array). Returns, per target, one fit summary per pair.
    """
    _quiet_readonly_arrays()
    expected = sum(3 + 2 * len(seeds) for _, _, seeds in layout)
    if len(arrays) != expected:
        raise ValueError(f"expected {expected} arrays, got {len(arrays)}")
    est = get_estimator(estimator)
    dev = _task_device(device)
    groups, at = [], 0
    for d_target, marg_seed, pair_seeds in layout:
        v_train, v_val, state = arrays[at : at + 3]
        marginal = est.restore_marginal(state, d_target, config, marg_seed, dev)
        at += 3
        sources = [(arrays[at + 2 * k], arrays[at + 2 * k + 1], seed) for k, seed in enumerate(pair_seeds)]
        at += 2 * len(pair_seeds)
        groups.append((marginal, sources, v_train, v_val))
    outcomes = est.fit_conditional_batch(groups, config)
    return [[_fit_summary(outcome) for outcome in group] for group in outcomes]
