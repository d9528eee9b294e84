"""The information-sufficiency stage: the IS matrix of one estimator over the run's models, and its scores."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from flare_core.compute.executor import torch_threads
from flare_core.run.outcomes import StageSkipped
from flare_core.run.params import RunParams
from flare_core.store.manifest import candidates, controls, record_worker
from flare_core.store.runs import Run

#: Fewer texts than this leave fewer than 2 held out (a tenth) to test the densities on.
MIN_SUFFICIENCY_TEXTS = 20


def sufficiency_rows(n: int, limit: int | None, seed: int) -> np.ndarray:
    if limit is None or n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def densities_on_cuda(params: RunParams) -> bool:
    """Whether the density estimators of a run with ``params`` train on a CUDA device."""
    from flare_core.device import pick_device

    return pick_device(params.device).type == "cuda"


def conditionals_per_model(params: RunParams, n_sources: int, stored: int | None = None) -> int:
    """How many conditional flows of one target train together as one batched model.

    As the run asks (``batch_conditionals``; 1: one at a time), else every one of them, on a CPU as on
    CUDA: one vmapped model of a target's conditionals takes fewer and larger kernels than its flows one
    by one (``bench/speed/flows_stage.py``). A run resumed over stored units keeps the grouping they were
    trained with (``stored``, from the unit store), so they stay those of one configuration.
    """
    if stored is not None:
        return stored
    if params.batch_conditionals is not None:
        return params.batch_conditionals
    return max(1, n_sources)


def stored_options(store_dir: Path) -> dict[str, Any]:
    """The run options (``RUN_OPTIONS``: ``batch_conditionals``, ``even_batches``…) the flow units stored
    under ``store_dir`` were trained with; empty when none are stored. A store written before an option
    existed was trained with that option's earlier behaviour."""
    from flare_core.analyses.sufficiency.flows import RUN_OPTIONS
    from flare_core.analyses.sufficiency.unit_store import stored_config

    config = stored_config(store_dir)
    if config is None or config.get("estimator") != "flow":
        return {}
    return {name: config[name] for name in RUN_OPTIONS if name in config and name != "autocast"}


def sufficiency_stage(
    run: Run, ok: list[str], estimator: str, params: RunParams, report, executor=None
) -> None:
    from flare_core.analyses import sufficiency

    ranked = candidates(run, ok)
    probes = controls(run, ok)
    # controls are sources only: IS towards them would reward whatever they carry
    sources = ranked + probes
    targets = [m for m in ok if m not in probes]
    n_texts = len(run.corpus_frame())
    why = None
    if not any(s != t for s in ranked for t in targets):
        why = (
            "information sufficiency ranks candidates by what each tells about the others: it needs at "
            f"least two embedded models that are not controls (this run has {len(targets)})"
        )
    elif n_texts < MIN_SUFFICIENCY_TEXTS:
        why = (
            "information sufficiency fits densities on most texts and tests them on a tenth held out: it "
            f"needs at least {MIN_SUFFICIENCY_TEXTS} texts (this corpus has {n_texts})"
        )
    if why:
        run.save_json({"skipped": why}, f"sufficiency_{estimator}.json")
        raise StageSkipped(why)
    rows = sufficiency_rows(n_texts, params.max_texts_sufficiency, params.seed)
    if len(rows) == n_texts:  # every text: memory-mapped, large ones are trained a mini-batch at a time
        embeddings = {m: run.load_embeddings(m, mmap=True) for m in ok}
    else:
        embeddings = {m: np.asarray(run.load_embeddings(m, mmap=True)[rows]) for m in ok}
    store_dir = run.artefact("sufficiency", estimator, "pairs")
    stored = stored_options(store_dir)  # a resumed run trains its other units as its stored ones were
    grouping = conditionals_per_model(params, len(sources) - 1, stored.get("batch_conditionals"))
    config = sufficiency.get_estimator(estimator).run_config(
        params.flow_preset, **{**stored, "autocast": params.autocast, "batch_conditionals": grouping}
    )
    # in this process, one torch thread: a 32-d flow is too small to share between threads, and on a busy
    # CPU they wait on each other (8 models × 250 texts, flows, 2 cores at load 5: 20–27 s with one
    # thread, 164–242 s with two; quiet, 9 models × 2,000 texts: 56.9 s and 70.9 s)
    with torch_threads(1) if executor is None else contextlib.nullcontext():
        result = sufficiency.sufficiency_matrix(
            embeddings,
            estimator=estimator,
            config=config,
            sources=sources,
            targets=targets,
            seed=params.seed,
            device=params.device,
            store_dir=store_dir,
            progress=_UnitProgress(run, f"sufficiency_{estimator}", report),
            should_stop=run.cancel_requested,
            executor=executor,
            max_dims=params.max_dims,
        )
    result.save(run.artefact("sufficiency", estimator, "result"))
    if not result.failed.empty:
        run.save_frame(result.failed.astype(str), "sufficiency", estimator, "failed.parquet")
        warnings = run.manifest.get("warnings", [])
        warnings.append(f"{estimator}: {len(result.failed)} units failed; `flare resume` retries them")
        run.update(warnings=warnings)
        if not np.isfinite(result.is_matrix.to_numpy()).any():
            first = result.failed.iloc[0]
            raise RuntimeError(
                f"{estimator}: every information-sufficiency unit failed; the first "
                f"({first['stage']} {first['target']}) with: {first['error']}"
            )
    scores = sufficiency.model_scores(result, seed=params.seed)
    is_control = scores["model"].isin(probes)
    ranked_scores = scores[~is_control].reset_index(drop=True)
    ranked_scores["rank"] = ranked_scores["score"].rank(ascending=False, method="min")
    run.save_frame(ranked_scores, "sufficiency", estimator, "scores.parquet")
    if is_control.any():
        run.save_frame(
            _placed(scores[is_control], ranked_scores), "sufficiency", estimator, "controls.parquet"
        )
    run.save_frame(sufficiency.all_scores(result), "sufficiency", estimator, "all_scores.parquet")


def _placed(control_scores, ranked_scores):
    """Controls' scores with ``would_rank``: the rank each would take among the ranked models."""
    ranked = ranked_scores["score"].to_numpy()
    out = control_scores.drop(columns=["rank"]).reset_index(drop=True)
    out["would_rank"] = [int((ranked > s).sum()) + 1 if np.isfinite(s) else np.nan for s in out["score"]]
    out["of"] = len(ranked)
    return out


class _UnitProgress:
    """Turns the matrix's progress events into the run's stage progress and per-worker unit counts."""

    def __init__(self, run: Run, stage: str, report: Callable[..., None]) -> None:
        self.run, self.stage, self.report = run, stage, report

    def __call__(self, event: dict) -> None:
        what = (
            event.get("target")
            if event.get("stage") == "marginal"
            else f"{event.get('source')} → {event.get('target')}"
        )
        failed = f" (failed: {event['error']})" if event.get("error") else ""
        unit = f"{event.get('stage')}: {what}"
        ok = not event.get("error")
        record_worker(self.run, self.stage, unit, event.get("worker"), event.get("seconds"), ok)
        self.report(self.stage, event["done"], event["total"], f"{unit}{failed}")
