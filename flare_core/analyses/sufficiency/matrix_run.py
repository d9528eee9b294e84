"""One sufficiency matrix in progress: its units, what each needs, and what each finished unit leaves.

:class:`MatrixRun` is the :class:`~flare_core.compute.scheduler.UnitHandler` of
:func:`~flare_core.analyses.sufficiency.matrix.sufficiency_matrix`: it takes units from the unit store
when they are there, builds the task of the others (sharing each standardised array and each marginal's
weights through the executor once), stores and records every outcome, reports progress, and assembles
the :class:`~flare_core.analyses.sufficiency.result.SufficiencyResult`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.analyses.sufficiency._rows import StandardizedRows
from flare_core.analyses.sufficiency._standardize import _derive_seed
from flare_core.analyses.sufficiency._whiten import whiten
from flare_core.analyses.sufficiency.registry import get_estimator
from flare_core.analyses.sufficiency.result import (
    FAILED_COLUMNS,
    MARGINAL_COLUMNS,
    RECORD_COLUMNS,
    SufficiencyResult,
)
from flare_core.analyses.sufficiency.unit_store import UnitStore
from flare_core.analyses.sufficiency.units import (
    ConditionalBatchUnit,
    ConditionalGroupUnit,
    ConditionalUnit,
    MarginalUnit,
    conditional_batch_task,
    conditional_group_task,
    conditional_task,
    marginal_task,
)
from flare_core.compute import Executor, Outcome, Resources
from flare_core.compute.scheduler import Task, Unit
from flare_core.errors import Cancelled, DependencyFailed

_STREAM_BYTES = 256 * 2**20


@dataclass(frozen=True)
class MatrixInputs:
    """What every unit of one matrix trains from: the estimator's name, the arrays (n, d_name), the
    widths the densities are fitted in, the split, the estimator's config, the seed, the device tasks
    compute on, the resources they ask for, whether to stream, and each array's standardisation and
    whitening ``(mean, std, projection | None)`` fitted on the training split."""

    estimator: str
    arrays: dict[str, np.ndarray]
    dims: dict[str, int]
    train_idx: np.ndarray
    val_idx: np.ndarray
    config: Any
    seed: int
    device: str | torch.device | None
    resources: Resources
    stream: bool | None
    reductions: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]]


class MatrixRun:
    """The state of one matrix while its units run: finished marginals and pairs, failures, progress,
    and the handles of the arrays and marginal weights shared with the executor."""

    def __init__(
        self,
        inputs: MatrixInputs,
        plan: list[tuple[str, list[str]]],
        store: UnitStore,
        executor: Executor,
        progress: Callable[[dict], None] | None,
        should_stop: Callable[[], bool] | None,
        on_error: str,
    ) -> None:
        self.inputs, self.plan, self.store, self.executor = inputs, plan, store, executor
        self.progress, self.should_stop, self.on_error = progress, should_stop, on_error
        estimator = get_estimator(inputs.estimator)
        self.uses_marginal = estimator.uses_marginal
        self.group = estimator.group_size(inputs.config)
        self.targets_per_batch = estimator.targets_per_batch(inputs.config)
        self.n_val = len(inputs.val_idx)
        self.total = sum(1 + len(srcs) for _, srcs in plan)
        self.done = 0
        self.marginals: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
        self.pairs: dict[tuple[str, str], tuple[dict[str, Any], np.ndarray]] = {}
        self.failures: list[dict[str, Any]] = []
        self.blocked: set[Unit] = set()
        self.handles: dict[str, tuple[Any, Any]] = {}
        self.states: dict[str, Any] = {}
        self.pairs_left = {t: len(srcs) for t, srcs in plan}

    # -- the plan --------------------------------------------------------------------------------------

    def units(self) -> list[Unit]:
        """Every target's marginal, then its conditionals (one per pair, or in groups of
        ``batch_conditionals``, or with ``batch_targets`` > 1 such groups of several targets of one width
        together)."""
        units: list[Unit] = [MarginalUnit(t) for t, _ in self.plan]
        if self.targets_per_batch > 1:
            return units + self._batch_units()
        for target, srcs in self.plan:
            if self.group > 1:
                units += [
                    ConditionalGroupUnit(target, tuple(srcs[a : a + self.group]))
                    for a in range(0, len(srcs), self.group)
                ]
            else:
                units += [ConditionalUnit(s, target) for s in srcs]
        return units

    def _batch_units(self) -> list[Unit]:
        """The targets of each width (in plan order) in runs of ``batch_targets``; the i-th unit of a run
        holds the i-th group of ``batch_conditionals`` sources of each of its targets."""
        by_width: dict[int, list[tuple[str, list[str]]]] = {}
        for target, srcs in self.plan:
            by_width.setdefault(self.inputs.dims[target], []).append((target, srcs))
        units: list[Unit] = []
        per = self.targets_per_batch
        for plans in by_width.values():
            for run in (plans[a : a + per] for a in range(0, len(plans), per)):
                starts = range(0, max(len(srcs) for _, srcs in run), self.group)
                for a in starts:
                    groups = tuple((t, tuple(srcs[a : a + self.group])) for t, srcs in run if srcs[a:])
                    units.append(ConditionalBatchUnit(groups))
        return units

    # -- UnitHandler -----------------------------------------------------------------------------------

    def pending(self, unit: Unit) -> Unit | None:
        """Take ``unit`` (or the stored part of a group) from the unit store when it holds it."""
        if isinstance(unit, MarginalUnit):
            stored = self.store.load_marginal(unit.target, self.n_val)
            if stored is None:
                return unit
            self._marginal_done(unit.target, stored[0], stored[1], resumed=True)
            return None
        if isinstance(unit, ConditionalUnit):
            return None if self._resumed_pair(unit.source, unit.target) else unit
        if isinstance(unit, ConditionalBatchUnit):
            groups = tuple(
                (target, tuple(s for s in sources if not self._resumed_pair(s, target)))
                for target, sources in unit.groups
            )
            groups = tuple((target, sources) for target, sources in groups if sources)
            return ConditionalBatchUnit(groups) if groups else None
        assert isinstance(unit, ConditionalGroupUnit)
        todo = tuple(s for s in unit.sources if not self._resumed_pair(s, unit.target))
        return ConditionalGroupUnit(unit.target, todo) if todo else None

    def task(self, unit: Unit) -> Task:
        inputs, seed = self.inputs, self.inputs.seed
        if isinstance(unit, MarginalUnit):
            v_tr, v_va = self._data(unit.target)
            args = (
                inputs.estimator,
                inputs.config,
                v_tr,
                v_va,
                _derive_seed(seed, "marginal", unit.target),
                inputs.device,
            )
            return Task(marginal_task, args, inputs.resources)
        if isinstance(unit, ConditionalBatchUnit):
            return self._batch_task(unit)
        marginal_seed = _derive_seed(seed, "marginal", unit.target)
        if isinstance(unit, ConditionalGroupUnit):
            v_tr, v_va = self._data(unit.target)
            args = (
                inputs.estimator,
                inputs.config,
                v_tr,
                v_va,
                self._state(unit.target) if self.uses_marginal else None,
                inputs.dims[unit.target],
                marginal_seed,
                [_derive_seed(seed, "conditional", source, unit.target) for source in unit.sources],
                inputs.device,
                *[handle for source in unit.sources for handle in self._data(source)],
            )
            return Task(conditional_group_task, args, inputs.resources)
        assert isinstance(unit, ConditionalUnit)
        u_tr, u_va = self._data(unit.source)
        v_tr, v_va = self._data(unit.target)
        args = (
            inputs.estimator,
            inputs.config,
            u_tr,
            u_va,
            v_tr,
            v_va,
            self._state(unit.target) if self.uses_marginal else None,
            inputs.dims[unit.target],
            marginal_seed,
            _derive_seed(seed, "conditional", unit.source, unit.target),
            inputs.device,
        )
        return Task(conditional_task, args, inputs.resources)

    def _batch_task(self, unit: ConditionalBatchUnit) -> Task:
        inputs, seed = self.inputs, self.inputs.seed
        layout, arrays = [], []
        for target, sources in unit.groups:
            pair_seeds = [_derive_seed(seed, "conditional", source, target) for source in sources]
            layout.append((inputs.dims[target], _derive_seed(seed, "marginal", target), pair_seeds))
            state = self._state(target) if self.uses_marginal else None
            arrays += [*self._data(target), state, *[h for source in sources for h in self._data(source)]]
        args = (inputs.estimator, inputs.config, layout, inputs.device, *arrays)
        return Task(conditional_batch_task, args, inputs.resources)

    def finish(self, unit: Unit, outcome: Outcome) -> None:
        """Store and record a unit the executor finished, or its failure."""
        if not outcome.ok:
            self._failed(unit, outcome)
            return
        fit = outcome.value
        if isinstance(unit, MarginalUnit):
            target = unit.target
            record = {
                "target": target,
                "d_target": self.inputs.dims[target],
                "nll_train": fit["nll_train"],
                "nll_val": fit["nll_val"],
                "epochs": fit["epochs"],
                "seconds": fit["seconds"],
            }
            self.store.save_marginal(target, record, fit["logp_val"], fit["state"])
            if self.uses_marginal and self.pairs_left[target]:
                self.states[target] = self.executor.put(fit["state"])
            self._marginal_done(target, record, fit["logp_val"], resumed=False, outcome=outcome)
        elif isinstance(unit, ConditionalBatchUnit):
            first = True
            for (target, sources), fits in zip(unit.groups, fit, strict=True):
                for source, pair_fit in zip(sources, fits, strict=True):
                    # the worker ran one unit for the batch: count it (and its time) once
                    self._pair_fitted(source, target, pair_fit, outcome if first else None)
                    first = False
        elif isinstance(unit, ConditionalGroupUnit):
            for k, (source, pair_fit) in enumerate(zip(unit.sources, fit, strict=True)):
                # the worker ran one unit for the group: count it (and its time) once
                self._pair_fitted(source, unit.target, pair_fit, outcome if k == 0 else None)
        else:
            assert isinstance(unit, ConditionalUnit)
            self._pair_fitted(unit.source, unit.target, fit, outcome)

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise Cancelled(f"cancelled after {self.done} of {self.total} units")

    # -- the result ------------------------------------------------------------------------------------

    def result(
        self,
        sources: list[str],
        targets: list[str],
        config: dict[str, Any],
        estimator: str,
        *,
        max_dims: int | None = None,
        raw_dims: dict[str, int] | None = None,
    ) -> SufficiencyResult:
        """Everything the run produced, in plan order (NaN in the matrix where a pair is missing);
        ``max_dims`` and ``raw_dims`` record the whitening the densities were fitted after."""
        marg_records, pair_records = [], []
        val_logp_marg: dict[str, np.ndarray] = {}
        val_logp_cond: dict[tuple[str, str], np.ndarray] = {}
        for target, srcs in self.plan:
            if target in self.marginals:
                marg_records.append(self.marginals[target][0])
                val_logp_marg[target] = self.marginals[target][1]
            for source in srcs:
                if (source, target) in self.pairs:
                    pair_records.append(self.pairs[(source, target)][0])
                    val_logp_cond[(source, target)] = self.pairs[(source, target)][1]
        is_matrix = pd.DataFrame(np.nan, index=list(sources), columns=list(targets), dtype=np.float64)
        for rec in pair_records:
            is_matrix.loc[rec["source"], rec["target"]] = rec["is_nats"]
        return SufficiencyResult(
            names=list(targets),
            sources=list(sources),
            dims=self.inputs.dims,
            is_matrix=is_matrix,
            records=pd.DataFrame(pair_records, columns=RECORD_COLUMNS),
            val_logp_marg=val_logp_marg,
            val_logp_cond=val_logp_cond,
            config=config,
            seed=self.inputs.seed,
            train_idx=self.inputs.train_idx,
            val_idx=self.inputs.val_idx,
            estimator=estimator,
            marginals=pd.DataFrame(marg_records, columns=MARGINAL_COLUMNS),
            failed=pd.DataFrame(self.failures, columns=FAILED_COLUMNS),
            max_dims=max_dims,
            raw_dims=raw_dims,
        )

    # -- shared arrays and weights ---------------------------------------------------------------------

    def _data(self, name: str) -> tuple[Any, Any]:
        """Standardised, whitened (train, val) data of ``name``, shared through the executor once."""
        if name not in self.handles:
            inputs, put = self.inputs, self.executor.put
            x = inputs.arrays[name]
            mean, std, projection = inputs.reductions[name]
            if _streams(x, inputs.stream):
                train = StandardizedRows(x, inputs.train_idx, mean, std, projection)
                val = StandardizedRows(x, inputs.val_idx, mean, std, projection)
                self.handles[name] = (put(train), put(val))
            else:
                z = whiten(x, mean, std, projection)
                self.handles[name] = (put(z[inputs.train_idx]), put(z[inputs.val_idx]))
        return self.handles[name]

    def _state(self, target: str) -> Any:
        """The shared handle of ``target``'s marginal weights (loaded from the store after a resume)."""
        if target not in self.states:
            state = self.store.marginal_state(target, torch.device("cpu"))
            if state is None:
                raise ValueError(
                    f"the stored marginal of {target!r} has no weights file; delete its record and rerun"
                )
            self.states[target] = self.executor.put(state)
        return self.states[target]

    # -- records ---------------------------------------------------------------------------------------

    def _report(
        self,
        stage: str,
        source: str | None,
        target: str,
        resumed: bool,
        error: str | None = None,
        outcome: Outcome | None = None,
    ) -> None:
        self.done += 1
        if self.progress is None:
            return
        event: dict[str, Any] = {
            "stage": stage,
            "source": source,
            "target": target,
            "done": self.done,
            "total": self.total,
            "resumed": resumed,
        }
        if error is not None:
            event["error"] = error
        if outcome is not None:
            event.update(worker=outcome.worker, seconds=outcome.seconds)
        self.progress(event)

    def _marginal_done(
        self,
        target: str,
        record: dict[str, Any],
        logp: np.ndarray,
        resumed: bool,
        outcome: Outcome | None = None,
    ) -> None:
        self.marginals[target] = (record, logp)
        self._report("marginal", None, target, resumed, outcome=outcome)

    def _resumed_pair(self, source: str, target: str) -> bool:
        stored = self.store.load_pair(source, target, self.n_val)
        if stored is None:
            return False
        self.pairs[(source, target)] = stored
        self._pair_finished(target)
        self._report("conditional", source, target, True)
        return True

    def _pair_fitted(self, source: str, target: str, fit: dict[str, Any], outcome: Outcome | None) -> None:
        record = self._pair_record(source, target, fit)
        self.store.save_pair(source, target, record, fit["logp_val"])
        self.pairs[(source, target)] = (record, fit["logp_val"])
        self._pair_finished(target)
        self._report("conditional", source, target, False, outcome=outcome)

    def _pair_finished(self, target: str) -> None:
        """One pair of ``target`` less to train; its marginal's shared weights go with the last one."""
        self.pairs_left[target] -= 1
        if self.pairs_left[target] == 0:
            self.states.pop(target, None)

    def _pair_record(self, source: str, target: str, fit: dict[str, Any]) -> dict[str, Any]:
        dims = self.inputs.dims
        marg_record, marg_logp = self.marginals[target]
        nll_marg_val = float(-np.mean(marg_logp))
        nll_cond_val = fit["nll_val"]
        is_nats = nll_marg_val - nll_cond_val
        # the conditional's own best figure, before its starting point (the marginal itself, IS 0) is kept
        raw = fit.get("raw_nll_val")
        is_raw = is_nats if raw is None else nll_marg_val - raw
        return {
            "source": source,
            "target": target,
            "d_source": dims[source],
            "d_target": dims[target],
            "nll_marg_train": marg_record["nll_train"],
            "nll_marg_val": nll_marg_val,
            "nll_cond_train": fit["nll_train"],
            "nll_cond_val": nll_cond_val,
            "is_nats": is_nats,
            "is_per_dim": is_nats / dims[target],
            "is_raw_nats": is_raw,
            "is_raw_per_dim": is_raw / dims[target],
            "delta_emp_marg": abs(nll_marg_val - marg_record["nll_train"]),
            "delta_emp_cond": abs(nll_cond_val - fit["nll_train"]),
            "epochs": fit["epochs"],
            "seconds": fit["seconds"],
        }

    def _failed(self, unit: Unit, outcome: Outcome) -> None:
        """Record a failed unit (``on_error="continue"``) or re-raise its error (``"raise"``)."""
        error = outcome.error
        assert error is not None
        if isinstance(error, DependencyFailed):  # a pair whose target's marginal failed
            if unit in self.blocked:  # a batch of targets two of whose marginals failed: recorded once
                return
            self.blocked.add(unit)
            assert isinstance(error.unit, MarginalUnit)
            failed = error.unit.target
            why = f"the marginal of {failed!r} failed ({_error_text(error.error)})"
            for source, target in _pairs(unit):
                if target == failed:
                    self._fail("conditional", source, target, why)
                else:  # batched with the failed target's pairs: not trained, retried by a resume
                    self._pair_finished(target)
                    self._fail("conditional", source, target, f"batched with the pairs of {failed!r}: {why}")
            return
        if self.on_error == "raise":
            raise error
        text = _error_text(error)
        if isinstance(unit, MarginalUnit):
            self._fail("marginal", None, unit.target, text, outcome)
            return
        for source, target in _pairs(unit):
            self._pair_finished(target)
            self._fail("conditional", source, target, text, outcome)

    def _fail(
        self, stage: str, source: str | None, target: str, error: str, outcome: Outcome | None = None
    ) -> None:
        self.failures.append({"stage": stage, "source": source, "target": target, "error": error})
        self._report(stage, source, target, False, error, outcome)


def _pairs(unit: Unit) -> list[tuple[str, str]]:
    """The (source, target) pairs whose conditionals ``unit`` trains."""
    if isinstance(unit, ConditionalBatchUnit):
        return [(source, target) for target, sources in unit.groups for source in sources]
    if isinstance(unit, ConditionalGroupUnit):
        return [(source, unit.target) for source in unit.sources]
    assert isinstance(unit, ConditionalUnit)
    return [(unit.source, unit.target)]


def _streams(x: np.ndarray, stream: bool | None) -> bool:
    """Whether ``x`` is trained from on-the-fly mini-batches (see ``stream`` in ``sufficiency_matrix``)."""
    if stream is not None:
        return stream
    return isinstance(x, np.memmap) and x.nbytes > _STREAM_BYTES


def _error_text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}".strip()
