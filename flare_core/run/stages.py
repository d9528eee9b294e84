"""One run from a corpus to stored artefacts: the code path shared by the CLI, the dashboard and notebooks.

    corpus → embeddings of the candidates (cached; the quickest first) → the answer, as soon as the quick
           candidates are embedded: a provisional verdict, from the labels when the run has a label column,
           else from the label-free rule (the few-label page and ``flare label`` work from here on), which
           names the candidates still being embedded and is written again as each of them joins
           → embeddings of the other models → downstream and labels (labels of any kind: the verdict again)
           → the map: information sufficiency (a verdict after each estimator) → geometry → validation
           studies → maps → collapse (SOCM) → layer-wise concentration → summary → final verdict

``create_run`` (:mod:`flare_core.run.create`) stores the corpus and parameters (status ``queued``);
:func:`compute_stages` computes every stage, skipping work already stored, so that an interrupted run
resumes where it stopped. Each stage is a module of this package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.answer.from_labels import candidate_ids
from flare_core.answer.write import write_verdict
from flare_core.compute import Executor
from flare_core.data.judgements import JUDGEMENTS
from flare_core.run.baseline_stages import downstream_stage, geometry_stage, maps_stage
from flare_core.run.embedding_stage import embedding_costs, embedding_stage, token_model
from flare_core.run.eta import StagePlan, run_plan, text_units
from flare_core.run.labels_stage import comparison_stage
from flare_core.run.outcomes import StageRunner
from flare_core.run.params import RunParams
from flare_core.run.progress import ProgressReporter
from flare_core.run.stage_speeds import apply_stage_speeds, keep_stage_speeds, load_stage_speeds
from flare_core.run.sufficiency_stage import densities_on_cuda, sufficiency_stage
from flare_core.run.summary import summary_table
from flare_core.run.token_stages import collapse_rows, collapse_stage, concentration_stage
from flare_core.run.validation_stage import run_studies
from flare_core.store.cache_folder import sweep_stale_scratch
from flare_core.store.manifest import transformer_models
from flare_core.store.runs import Run


class StageTimer:
    """Times a stage into the manifest and checks for cancellation before it starts."""

    def __init__(self, run: Run, name: str) -> None:
        self.run, self.name = run, name

    def __enter__(self) -> StageTimer:
        self.run.check_cancelled()
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            timings = self.run.manifest.get("timings", {})
            timings[self.name] = round(time.perf_counter() - self.started, 3)
            self.run.update(timings=timings)


def compute_stages(run: Run, *, progress_bar: bool = False) -> None:
    """Compute every stage of ``run`` that is not stored yet.

    The embeddings come first and every other stage needs them: a run where no model could be embedded
    fails. What a person can act on comes next: the answer is written as soon as the quick candidates are
    embedded (again as each slower one joins, and once all are in), before the map (the estimators, the
    pictures, the collapse). Each stage runs on its own (:class:`~flare_core.run.outcomes.StageRunner`):
    one that fails is recorded with its reason, and the stages that do not need it still run.
    """
    params = RunParams.from_dict(run.manifest["params"])
    sweep_stale_scratch()
    report = ProgressReporter(run, progress_bar)
    corpus = run.corpus_frame()
    texts = corpus["text"].tolist()
    labels = corpus["label"].tolist() if run.manifest["corpus"].get("has_labels") else None

    costs = embedding_costs(run, params)
    base = _plan(run, params, texts, costs)
    plan = apply_stage_speeds(base, load_stage_speeds())  # as fast as this machine ran them before
    run.update(
        plan=[dataclasses.asdict(stage) for stage in plan], base_plan=[dataclasses.asdict(s) for s in base]
    )
    # Asked-for workers (or Ray) run both stages on one executor. Automatic: the embeddings run in this
    # process with every core (one heavy model, all-mpnet-base-v2, dominates the stage and is fastest
    # with all threads), then a large IS matrix gets a pool of its own.
    chosen = params.workers is not None or params.executor == "ray"
    executor = make_executor(params) if chosen else None
    stages = StageRunner(run)
    try:
        with StageTimer(run, "embeddings"):
            embedding_stage(
                run,
                params,
                texts,
                report,
                executor,
                on_candidates=lambda: _answer_first(run, stages, labels),
                on_some_candidates=lambda first: _answer_early(run, stages, labels, first),
                costs=costs,
            )
        ok = [m["id"] for m in run.manifest["models"] if m["status"] == "done"]
        if not ok:
            raise RuntimeError("no model could be embedded; see each model's error in the run")
        _labels_stages(run, stages, params, ok, labels, report)
        if not chosen and params.estimators:
            is_units = next((s.units for s in plan if s.name.startswith("sufficiency_")), 0)
            executor = make_executor(
                params, is_units=is_units, n_texts=_sufficiency_texts(params, len(texts))
            )
        # then the map: each estimator's ranking joins the verdict as soon as it exists
        for estimator in params.estimators:
            stages.run(
                f"sufficiency_{estimator}",
                lambda e=estimator: sufficiency_stage(run, ok, e, params, report, executor=executor),
                models=ok,
            )
            stages.run("verdict", lambda: write_verdict(run, provisional=True))
        _later_stages(run, stages, params, ok, texts, labels, report, executor)
    finally:
        if executor is not None:
            executor.close()
    stages.run("summary", lambda: summary_table(run))
    stages.run("verdict", lambda: write_verdict(run, provisional=False))
    with contextlib.suppress(OSError):  # the next run's plan: how fast this machine ran each stage
        keep_stage_speeds(run.manifest)


def _answer_first(run: Run, stages: StageRunner, labels) -> None:
    """The answer once every candidate is embedded (the other models may still be embedding): the
    candidates compared on the run's label column when it has one, then the provisional verdict."""
    if labels is not None:
        stages.run("labels", lambda: comparison_stage(run, labels), models=candidate_ids(run))
    stages.run("verdict", lambda: write_verdict(run, provisional=True))


def _answer_early(run: Run, stages: StageRunner, labels, first: bool) -> None:
    """The answer while slower candidates are still being embedded (the verdict lists them as pending):
    from the quick group (``first``), then again after each candidate that joins it. A run with a label
    column compares the candidates on it once, from the quick group; all of them are compared when every
    candidate is in (:func:`_answer_first`)."""
    if labels is not None:
        if first:
            stages.run("labels", lambda: comparison_stage(run, labels), models=candidate_ids(run))
            stages.run("verdict", lambda: write_verdict(run, provisional=True))
        return
    stages.run("verdict", lambda: write_verdict(run, provisional=True))


def _labels_stages(run: Run, stages: StageRunner, params: RunParams, ok, labels, report) -> None:
    """What the run's labels of any kind say, before the map: each model scored on them (downstream) and
    the candidates compared on them (scored pairs and search judgements need the downstream stage's
    scores first), then the verdict again."""
    judged = run.has("pairs.parquet") or run.has(JUDGEMENTS)
    if params.downstream and (labels is not None or judged):
        stages.run("downstream", lambda: downstream_stage(run, ok, labels, params, report), models=ok)
    if labels is not None or judged:  # the labels decide: every candidate compared on them
        stages.run("labels", lambda: comparison_stage(run, labels), models=candidate_ids(run))
        stages.run("verdict", lambda: write_verdict(run, provisional=True))


def _later_stages(
    run: Run, stages: StageRunner, params: RunParams, ok, texts, labels, report, executor: Executor | None
) -> None:
    """The stages after information sufficiency, each on its own (see :func:`compute_stages`); the maps
    run on the estimators' ``executor`` when they had one (a pool of worker processes)."""
    estimated = [f"sufficiency_{e}" for e in params.estimators]
    if params.geometry:
        stages.run("geometry", lambda: geometry_stage(run, ok, labels, params, report), models=ok)
    scored = any(run.has("sufficiency", e, "scores.parquet") for e in ESTIMATOR_NAMES)
    none_left = bool(estimated) and all(n in stages.failed for n in estimated)
    if params.validation and (scored or none_left):
        studies = functools.partial(
            run_studies, run, params.validation, repeats=params.validation_repeats, report=report
        )
        if stages.run("validation", studies, needs=estimated if none_left else (), models=ok):
            stages.run("verdict", lambda: write_verdict(run, provisional=True))
    if params.maps:
        stages.run("maps", lambda: maps_stage(run, ok, params, report, executor), models=ok)
    transformers_ok = transformer_models(run)
    if params.collapse and transformers_ok:
        stages.run(
            "collapse",
            lambda: collapse_stage(run, transformers_ok, texts, params, report),
            models=transformers_ok,
        )
    if params.concentration and transformers_ok:
        stages.run(
            "concentration",
            lambda: concentration_stage(run, transformers_ok, texts, params, report),
            models=transformers_ok,
        )


def _plan(
    run: Run, params: RunParams, texts: list[str], costs: dict[str, tuple[float, float]]
) -> list[StagePlan]:
    """The run's stages with their prior costs, for the time-left estimate; ``costs``: each model's
    embedding cost (:func:`~flare_core.run.embedding_stage.embedding_costs`)."""
    n_texts = len(texts)
    role_of = {m["id"]: m.get("role", "candidate") for m in run.manifest["models"]}
    sources = [m for m in costs if role_of[m] != "reference"]
    targets = [m for m in costs if role_of[m] != "control"]
    is_units = len(targets) + sum(1 for s in sources for t in targets if s != t)
    fit_texts = _sufficiency_texts(params, n_texts)
    token_models = [
        token_model(run, m)
        for m in costs
        if _is_transformer(m) and (role_of[m] != "control" or m in params.models)
    ]
    return run_plan(
        n_texts=n_texts,
        n_fit=fit_texts * 0.9,  # the estimators' training split
        costs=costs,
        corpus_units=text_units(texts, params.max_length),
        estimators=params.estimators,
        is_units=is_units,
        is_pool=pool_workers(params, is_units=is_units, n_texts=fit_texts) > 1,
        collapse_models=token_models,
        collapse_texts=[texts[i] for i in collapse_rows(n_texts, params)],
        max_length=params.max_length,
        geometry=params.geometry,
        downstream=params.downstream and run.manifest["corpus"].get("has_labels", False),
        validation=bool(params.validation),
        maps=params.maps,
        collapse=params.collapse,
        concentration=params.concentration,
    )


def _sufficiency_texts(params: RunParams, n_texts: int) -> int:
    """How many of the corpus's ``n_texts`` the IS estimators read (a seeded sample above the limit)."""
    return min(n_texts, params.max_texts_sufficiency or n_texts)


def _is_transformer(model_id: str) -> bool:
    from flare_core.encoders import get_spec

    try:
        return get_spec(model_id).kind == "transformer"
    except ValueError:
        return False


#: A matrix this large runs its units on a pool of worker processes when ``workers`` is automatic.
_POOL_MIN_UNITS, _POOL_MIN_TEXTS = 24, 1000
#: The most worker processes an automatic pool starts on the CPU (each holds its own torch, about 0.3 GB),
#: and on a GPU (processes that keep it busy, each with every conditional of a target in one model).
_POOL_MAX_CPU_WORKERS, _POOL_CUDA_WORKERS = 8, 4


def pool_workers(params: RunParams, *, is_units: int = 0, n_texts: int = 0) -> int:
    """Worker processes for the embedding and sufficiency units: 1 runs them in this process.

    With ``workers`` None (automatic), a matrix of at least 24 units on at least 1,000 texts runs on a
    pool of worker processes, one torch thread each: a 32-d flow is too small for two threads to share
    one unit well, so units side by side use the cores better (9 models × 2,000 texts, fast flows, quiet
    2-core CPU: 70.9 s in this process with 2 threads, 32.1 s on the pool, workers started included);
    smaller matrices stay in this process, where starting a pool (torch imported in each worker) would
    cost more than it saves. On the CPU the pool has a worker per core, at most 8; on CUDA 4, each
    training every conditional of a target as one batched model
    (:func:`~flare_core.run.sufficiency_stage.conditionals_per_model`). The flows of 16 models × 2,000 texts,
    default preset, on a machine with 16 cores and an H200 (``bench/speed/gpu_figures.py``): 16 CPU workers 45
    s; CUDA, 4 workers batched 48 s, one process batched 76 s, 8 workers one conditional at a time 116 s: a
    flow this small keeps a GPU waiting on its kernel launches, so a GPU is worth it for the densities only
    against few cores.
    """
    if params.workers is not None:
        return params.workers
    if not (is_units >= _POOL_MIN_UNITS and n_texts >= _POOL_MIN_TEXTS):
        return 1
    cores = os.cpu_count() or 1
    limit = _POOL_CUDA_WORKERS if densities_on_cuda(params) else _POOL_MAX_CPU_WORKERS
    return min(limit, cores)


def make_executor(params: RunParams, *, is_units: int = 0, n_texts: int = 0):
    """The executor of the embedding and sufficiency units (see :func:`pool_workers`): None runs them in
    this process."""
    from flare_core.compute import get_executor

    if params.executor == "ray":
        return get_executor("ray", address=params.ray_address)
    workers = pool_workers(params, is_units=is_units, n_texts=n_texts)
    return get_executor("local", workers=workers) if workers > 1 else None
