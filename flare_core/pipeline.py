"""One run from a corpus to stored artefacts: the code path shared by the CLI, the dashboard and notebooks.

    corpus → embeddings (cached) → geometry → downstream (labels) → information sufficiency
           → collapse (SOCM) → layer-wise concentration → correlations → verdict → run store

``create_run`` stores the corpus and parameters (status ``queued``); ``execute`` computes every stage,
skipping work already stored, so that an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import platform
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.checks import check_bool, check_int
from flare_core.data.corpus import Corpus
from flare_core.errors import Cancelled
from flare_core.store.cache import cache_root, scratch_dir, sweep_stale_scratch
from flare_core.store.runs import Run, RunStore, safe_name

ESTIMATORS = ("flow", "gmm")
_SHUFFLE_TEXTS = 2000
FLOW_PRESETS = ("fast", "default")
_VERSIONED = (
    "flare-studio", "torch", "transformers", "sentence-transformers", "nflows", "numpy", "scipy",
    "scikit-learn", "pandas", "pyarrow", "networkx", "umap-learn", "streamlit", "ray",
)  # fmt: skip


@dataclass
class RunParams:
    """Everything that determines a run's numbers; stored in its manifest."""

    models: list[str]
    estimators: list[str] = field(default_factory=lambda: ["flow", "gmm"])
    flow_preset: str = "default"
    max_texts_sufficiency: int | None = 2000
    reference_pool: list[str] = field(default_factory=list)
    collapse: bool = True
    collapse_texts: int = 200
    concentration: bool = True
    concentration_texts: int = 32
    geometry: bool = True
    downstream: bool = True
    maps: bool = True
    map_points: int = 3000
    validation: list[str] = field(default_factory=lambda: ["subsampling", "aggregation", "pool_size"])
    validation_repeats: int = 20
    executor: str = "local"
    ray_address: str | None = None
    workers: int = 1
    autocast: bool = False
    batch_conditionals: int = 1
    seed: int = 0
    device: str | None = None
    batch_size: int = 32
    max_length: int | None = 256

    def validate(self) -> RunParams:
        if not self.models:
            raise ValueError("choose at least one model")
        if len(set(self.models)) != len(self.models):
            raise ValueError("a model is listed twice")
        unknown = sorted(set(self.estimators) - set(ESTIMATORS))
        if unknown:
            raise ValueError(f"unknown estimator(s) {unknown}: choose from {list(ESTIMATORS)}")
        if self.flow_preset not in FLOW_PRESETS:
            raise ValueError(f"unknown flow preset {self.flow_preset!r}: choose from {list(FLOW_PRESETS)}")
        for name in ("concentration_texts", "batch_size", "workers", "batch_conditionals"):
            check_int(getattr(self, name), name, min_value=1)
        check_int(self.collapse_texts, "collapse_texts", min_value=2, reason="SOCM compares pairs of texts")
        from flare_core.compute import EXECUTORS

        if self.executor not in EXECUTORS:
            raise ValueError(f"unknown executor {self.executor!r}: choose from {sorted(EXECUTORS)}")
        if self.ray_address and self.executor != "ray":
            raise ValueError("a Ray address needs the Ray executor (--executor ray)")
        if self.workers > 1 and self.executor != "local":
            raise ValueError("workers sizes the local process pool; a Ray cluster sizes itself")
        check_bool(self.autocast, "autocast")
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunParams:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the numbers."""
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def create_run(
    store: RunStore,
    corpus: Corpus,
    params: RunParams,
    *,
    name: str | None = None,
    precomputed: Mapping[str, np.ndarray] | None = None,
    run_id: str | None = None,
) -> Run:
    """Store ``corpus`` and ``params`` as a new queued run and return it.

    ``precomputed`` maps extra model names to validated float32 (N, d) embeddings (see
    ``flare_core.encoders.load_precomputed``); they join the run as models of kind ``precomputed``.
    """
    params.validate()
    precomputed = dict(precomputed or {})
    for model_name, array in precomputed.items():
        if model_name in params.models:
            raise ValueError(f"precomputed embeddings {model_name!r} have the name of a registry model")
        if array.shape[0] != len(corpus):
            raise ValueError(
                f"precomputed embeddings {model_name!r} have {array.shape[0]} rows but the corpus has {len(corpus)} texts"
            )
    models = [{"id": m, "kind": "registry", "role": "candidate", "status": "pending"} for m in params.models]
    models += [
        {"id": m, "kind": "precomputed", "role": "candidate", "status": "pending"} for m in precomputed
    ]
    models += [
        {"id": m, "kind": "registry", "role": "reference", "status": "pending"}
        for m in params.reference_pool
        if m not in params.models
    ]
    manifest = {
        "name": name or corpus.source_name,
        "corpus": {
            "source_name": corpus.source_name,
            "n_texts": len(corpus),
            "content_hash": corpus.content_hash,
            "text_column": corpus.text_column,
            "label_column": corpus.label_column,
            "has_labels": corpus.labels is not None,
            "has_pairs": corpus.pairs is not None,
            "stats": corpus.stats,
        },
        "models": models,
        "params": dataclasses.asdict(params),
        "versions": versions(),
        "seeds": {"global": params.seed},
        "timings": {},
    }
    run = store.create(manifest, run_id=run_id)
    run.save_frame(corpus.to_frame(), "corpus.parquet")
    if corpus.pairs is not None:
        run.save_frame(corpus.pairs.reset_index(drop=True), "pairs.parquet")
    for model_name, array in precomputed.items():
        run.save_embeddings(model_name, array)
    return run


# -- execution --------------------------------------------------------------------------------------------


class _Stage:
    """Times a stage into the manifest and checks for cancellation before it starts."""

    def __init__(self, run: Run, name: str) -> None:
        self.run, self.name = run, name

    def __enter__(self) -> _Stage:
        if self.run.cancel_requested():
            raise Cancelled(f"run {self.run.id} was cancelled")
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            timings = self.run.manifest.get("timings", {})
            timings[self.name] = round(time.perf_counter() - self.started, 3)
            self.run.update(timings=timings)


def execute(run: Run, *, progress_bar: bool = False) -> None:
    """Compute every stage of ``run`` that is not stored yet."""
    params = RunParams.from_dict(run.manifest["params"])
    sweep_stale_scratch()
    report = _progress_reporter(run, progress_bar)
    corpus = run.corpus_frame()
    texts = corpus["text"].tolist()
    labels = corpus["label"].tolist() if run.manifest["corpus"].get("has_labels") else None

    executor = _make_executor(params)
    try:
        with _Stage(run, "embeddings"):
            _embed_all(run, params, texts, report, executor)
        ok = [m["id"] for m in run.manifest["models"] if m["status"] == "done"]
        if not ok:
            raise RuntimeError("no model could be embedded; see each model's error in the run")

        if params.geometry:
            with _Stage(run, "geometry"):
                _geometry(run, ok, labels, params, report)
        if params.maps:
            with _Stage(run, "maps"):
                _maps(run, ok, params, report)
        if params.downstream and (labels is not None or run.has("pairs.parquet")):
            with _Stage(run, "downstream"):
                _downstream(run, ok, labels, params, report)
        for estimator in params.estimators:
            with _Stage(run, f"sufficiency_{estimator}"):
                _sufficiency(run, ok, estimator, params, report, executor=executor)
    finally:
        if executor is not None:
            executor.close()
    transformers_ok = [m for m in ok if _model_kind(run, m) in ("transformer", "control-transformer")]
    if params.collapse and transformers_ok:
        with _Stage(run, "collapse"):
            run_collapse(run, transformers_ok, texts, params, report)
    if params.concentration and transformers_ok:
        with _Stage(run, "concentration"):
            run_concentration(run, transformers_ok, texts, params, report)
    if params.validation and any(run.has("sufficiency", e, "scores.parquet") for e in ESTIMATORS):
        with _Stage(run, "validation"):
            validate_run(run, params.validation, repeats=params.validation_repeats, report=report)
    with _Stage(run, "summary"):
        summarise(run)


def _make_executor(params: RunParams):
    """The executor of the embedding and sufficiency units: None runs them in this process."""
    if params.executor == "ray":
        from flare_core.compute import get_executor

        return get_executor("ray", address=params.ray_address)
    if params.workers > 1:
        from flare_core.compute import get_executor

        return get_executor("local", workers=params.workers)
    return None


def _record_worker(
    run: Run, stage: str, unit: str, worker: str | None, seconds: float | None, ok: bool
) -> None:
    """Count a finished unit against the worker process that ran it (shown on the Runs page)."""
    if not worker:
        return
    workers = run.manifest.get("workers", {})
    entry = workers.setdefault(worker, {"units": 0, "failed": 0, "busy_s": 0.0})
    entry["units"] += 1
    entry["failed"] += 0 if ok else 1
    entry["busy_s"] = round(entry["busy_s"] + float(seconds or 0.0), 3)
    entry.update(stage=stage, last_unit=unit, last_seen=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    run.update(workers=workers)


def _progress_reporter(run: Run, progress_bar: bool) -> Callable[..., None]:
    bars: dict[str, Any] = {}

    def report(stage: str, done: int, total: int, message: str = "", **extra: Any) -> None:
        if run.cancel_requested():
            raise Cancelled(f"run {run.id} was cancelled")
        run.set_progress(stage, done, total, message, **extra)
        if progress_bar:
            from tqdm.auto import tqdm

            bar = bars.get(stage)
            if bar is None:
                bar = bars[stage] = tqdm(total=total, desc=stage, unit="step", leave=True)
            bar.total = total
            bar.n = done
            bar.set_postfix_str(message[:60], refresh=True)
            if done >= total:
                bar.close()

    return report


def _no_report(*args: Any, **kwargs: Any) -> None:
    return None


def _set_model(run: Run, model_id: str, **fields: Any) -> None:
    manifest = run.manifest
    for model in manifest["models"]:
        if model["id"] == model_id:
            model.update(fields)
    run.update(models=manifest["models"])


def _model_kind(run: Run, model_id: str) -> str:
    for model in run.manifest["models"]:
        if model["id"] == model_id:
            return model.get("encoder_kind", model.get("kind", ""))
    return ""


def _embed_all(
    run: Run, params: RunParams, texts: list[str], report: Callable[..., None], executor: Any = None
) -> None:
    """Embed the corpus with every model not stored yet, one unit per model on ``executor``.

    Each unit streams its embeddings into the shared embedding cache and returns the file; the run
    store then copies it. With no executor (or a serial local one) the units run here, in order, with
    per-batch progress; on a pool or cluster they run side by side and report when each finishes.
    """
    from flare_core.compute import LocalExecutor, Resources

    models = run.manifest["models"]
    corpus_hash = run.manifest["corpus"]["content_hash"]
    todo = []
    for model in models:
        model_id = model["id"]
        if run.embedding_path(model_id).exists():
            array = run.load_embeddings(model_id, mmap=True)
            _set_model(run, model_id, status="done", dim=int(array.shape[1]))
        else:
            todo.append(model_id)
    done_count = len(models) - len(todo)
    report("embeddings", done_count, len(models), f"embedding with {len(todo)} models")
    ex = executor or LocalExecutor()
    in_process = not ex.remote
    shared_texts = ex.put(texts)
    wants_gpu = not in_process and params.device is not None and params.device.startswith("cuda")
    resources = Resources(num_cpus=1.0, num_gpus=1.0 if wants_gpu else 0.0)

    def tick_for(model_id: str) -> Callable[[int, int], None]:
        def tick(done: int, total: int) -> None:
            report("embeddings", done_count, len(models), f"{model_id}: {done}/{total} texts", model=model_id)

        return tick

    tasks = [
        (
            ("embed", model_id),
            (
                model_id,
                shared_texts,
                corpus_hash,
                str(cache_root() / "embeddings"),
                params.device,
                params.batch_size,
                params.max_length,
                tick_for(model_id) if in_process else None,
            ),
        )
        for model_id in todo
    ]
    pending = list(tasks)
    try:
        while pending or ex.in_flight():
            while pending and ex.in_flight() < ex.max_in_flight:
                key, args = pending.pop(0)
                ex.submit(key, _embed_task, args, resources)
            outcome = ex.wait(timeout=None if in_process else 0.5)
            if outcome is None:  # units still running elsewhere: a cancel request stops them now
                if run.cancel_requested():
                    raise Cancelled(f"run {run.id} was cancelled")
                continue
            model_id = outcome.key[1]
            _record_worker(run, "embeddings", model_id, outcome.worker, outcome.seconds, outcome.ok)
            error = outcome.error
            if isinstance(error, Cancelled | KeyboardInterrupt):
                raise Cancelled(f"run {run.id} was cancelled")
            if error is None:
                info = dict(outcome.value)
                try:
                    run.copy_embeddings(model_id, info.pop("path"))
                except (FileNotFoundError, ValueError) as exc:  # a worker whose cache this machine cannot see
                    error = exc  # (other OS errors, such as a full disk, fail the run: it resumes later)
                else:
                    dim = int(run.load_embeddings(model_id, mmap=True).shape[1])
                    _set_model(run, model_id, status="done", dim=dim, **info)
            if error is not None:
                _set_model(run, model_id, status="failed", error=f"{type(error).__name__}: {error}")
            done_count += 1
            report(
                "embeddings", done_count, len(models), f"{model_id} {'done' if error is None else 'failed'}"
            )
    finally:
        if ex.in_flight():
            ex.cancel()
        if executor is None:
            ex.close()
    report("embeddings", len(models), len(models), "embeddings done")


def _embed_task(
    model_id: str,
    texts: list[str],
    corpus_hash: str,
    cache: str,
    device: str | None,
    batch_size: int,
    max_length: int | None,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """Embed ``texts`` with ``model_id`` into the embedding cache (any process that sees ``cache``).

    Returns the cache file's ``path`` and what the run records about the model.
    """
    from flare_core import encoders

    started = time.perf_counter()
    encoder = encoders.load_encoder(model_id, device=device, corpus_texts=texts)
    array = encoders.embed(
        encoder,
        texts,
        corpus_hash=corpus_hash,
        cache_dir=cache,
        batch_size=batch_size,
        max_length=max_length,
        progress=progress,
    )
    spec = encoder.spec
    return {
        "path": str(array.filename),
        "encoder_kind": _encoder_kind(encoder),
        "source": spec.source,
        "revision": spec.revision,
        "layers": spec.layers,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _encoder_kind(encoder: Any) -> str:
    from flare_core.encoders import TransformerEncoder

    if isinstance(encoder, TransformerEncoder):
        return "transformer" if encoder.spec.kind != "control" else "control-transformer"
    return encoder.spec.kind


def _candidates(run: Run, ok: Sequence[str]) -> list[str]:
    roles = {m["id"]: m.get("role", "candidate") for m in run.manifest["models"]}
    return [m for m in ok if roles.get(m) == "candidate"]


def _geometry(run: Run, ok: list[str], labels, params: RunParams, report) -> None:
    from flare_core.analyses.geometry import geometry_report

    rows = []
    for index, model_id in enumerate(ok):
        report("geometry", index, len(ok), f"geometry of {model_id}")
        x = run.load_embeddings(model_id)
        rows.append({"model": model_id, **geometry_report(x, labels=labels, seed=params.seed)})
    run.save_frame(pd.DataFrame(rows), "geometry.parquet")
    report("geometry", len(ok), len(ok), "geometry done")


def _maps(run: Run, ok: list[str], params: RunParams, report) -> None:
    from flare_core.analyses.maps import embedding_map

    for index, model_id in enumerate(ok):
        report("maps", index, len(ok), f"UMAP of {model_id}")
        parts = ("maps", f"{safe_name(model_id)}.parquet")
        if not run.has(*parts):
            run.save_frame(
                embedding_map(run.load_embeddings(model_id), max_points=params.map_points, seed=params.seed),
                *parts,
            )
    report("maps", len(ok), len(ok), "maps done")


def _downstream(run: Run, ok: list[str], labels, params: RunParams, report) -> None:
    from flare_core.analyses.downstream import downstream_report

    pairs = run.load_frame("pairs.parquet") if run.has("pairs.parquet") else None
    rows = []
    for index, model_id in enumerate(ok):
        report("downstream", index, len(ok), f"supervised oracle for {model_id}")
        x = run.load_embeddings(model_id)
        pair_embeddings = _pair_embeddings(run, model_id, pairs, params) if pairs is not None else None
        if labels is None and pair_embeddings is None:
            continue
        gold = qrels = None
        if pair_embeddings is not None:
            if pairs["score"].notna().any():
                gold = pairs["score"].to_numpy(dtype=float)
            else:  # retrieval: rank the distinct documents for each query; its own row's document is relevant
                documents, doc_index = np.unique(pairs["text_b"].to_numpy(dtype=object), return_inverse=True)
                first_row = {d: int(np.flatnonzero(doc_index == d)[0]) for d in range(len(documents))}
                pair_embeddings = (
                    pair_embeddings[0],
                    pair_embeddings[1][[first_row[d] for d in range(len(documents))]],
                )
                qrels = {q: {int(doc_index[q]): 1} for q in range(len(pairs))}
        result = downstream_report(
            x if labels is not None else None,
            labels=labels,
            pairs=pair_embeddings,
            gold=gold,
            qrels=qrels,
            seed=params.seed,
        )
        rows.append({"model": model_id, **result["scores"]})
    if rows:
        run.save_frame(pd.DataFrame(rows), "downstream.parquet")
    report("downstream", len(ok), len(ok), "downstream done")


def _pair_embeddings(run: Run, model_id: str, pairs: pd.DataFrame, params: RunParams):
    """(emb_a, emb_b) of the pair columns for STS, or None for precomputed models (no encoder to call)."""
    from flare_core import encoders

    if _model_kind(run, model_id) == "precomputed":
        return None
    encoder = encoders.load_encoder(
        model_id, device=params.device, corpus_texts=run.corpus_frame()["text"].tolist()
    )
    a = encoder.encode(pairs["text_a"].tolist(), batch_size=params.batch_size)
    b = encoder.encode(pairs["text_b"].tolist(), batch_size=params.batch_size)
    return (a, b)


def _sufficiency_rows(n: int, limit: int | None, seed: int) -> np.ndarray:
    if limit is None or n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def _sufficiency(run: Run, ok: list[str], estimator: str, params: RunParams, report, executor=None) -> None:
    from flare_core.analyses import sufficiency

    candidates = _candidates(run, ok)
    if len(ok) < 2:
        run.save_json(
            {"skipped": "information sufficiency needs at least two models"}, f"sufficiency_{estimator}.json"
        )
        return
    n_texts = len(run.corpus_frame())
    rows = _sufficiency_rows(n_texts, params.max_texts_sufficiency, params.seed)
    if len(rows) == n_texts:  # every text: memory-mapped, large ones are trained a mini-batch at a time
        embeddings = {m: run.load_embeddings(m, mmap=True) for m in ok}
    else:
        embeddings = {m: np.asarray(run.load_embeddings(m, mmap=True)[rows]) for m in ok}
    config = None
    if estimator == "flow":
        config = sufficiency.FlowConfig.fast() if params.flow_preset == "fast" else sufficiency.FlowConfig()
        config = dataclasses.replace(
            config, autocast=params.autocast, batch_conditionals=params.batch_conditionals
        )
    else:
        config = sufficiency.GMMConfig()
    stage = f"sufficiency_{estimator}"

    def tick(event: dict) -> None:
        what = (
            event.get("target")
            if event.get("stage") == "marginal"
            else f"{event.get('source')} → {event.get('target')}"
        )
        failed = f" (failed: {event['error']})" if event.get("error") else ""
        unit = f"{event.get('stage')}: {what}"
        _record_worker(run, stage, unit, event.get("worker"), event.get("seconds"), not event.get("error"))
        report(stage, event["done"], event["total"], f"{event.get('stage')}: {what}{failed}")

    result = sufficiency.sufficiency_matrix(
        embeddings,
        estimator=estimator,
        config=config,
        sources=candidates,
        targets=ok,
        seed=params.seed,
        device=params.device,
        store_dir=run.artefact("sufficiency", estimator, "pairs"),
        progress=tick,
        should_stop=run.cancel_requested,
        executor=executor,
    )
    result.save(run.artefact("sufficiency", estimator, "result"))
    if not result.failed.empty:
        run.save_frame(result.failed.astype(str), "sufficiency", estimator, "failed.parquet")
        warnings = run.manifest.get("warnings", [])
        warnings.append(f"{estimator}: {len(result.failed)} units failed; `flare resume` retries them")
        run.update(warnings=warnings)
    scores = sufficiency.model_scores(result, seed=params.seed)
    run.save_frame(scores, "sufficiency", estimator, "scores.parquet")
    run.save_frame(sufficiency.all_scores(result), "sufficiency", estimator, "all_scores.parquet")


def run_collapse(
    run: Run, models: list[str], texts: list[str], params: RunParams, report=None, *, recompute: bool = False
) -> None:
    """SOCM of all pairs among ``params.collapse_texts`` sampled texts, per transformer model.

    Models whose pairs are already stored for the same sample are skipped unless ``recompute``.
    With labels, the summary also splits SOCM between same-label and different-label pairs.
    """
    report = report or _no_report
    from flare_core import encoders
    from flare_core.analyses import collapse

    n = min(params.collapse_texts, len(texts))
    sample = np.sort(np.random.default_rng(params.seed).choice(len(texts), size=n, replace=False))
    if run.has("collapse", "sample_rows.npy") and not np.array_equal(
        run.load_array("collapse", "sample_rows.npy"), sample
    ):
        recompute = True
    run.save_array(sample.astype(np.int64), "collapse", "sample_rows.npy")
    pairs = collapse.sample_pairs(n, kind="all", seed=params.seed)
    corpus = run.corpus_frame()
    labels = corpus["label"].to_numpy() if run.manifest["corpus"].get("has_labels") else None
    summaries = []
    for index, model_id in enumerate(models):
        report("collapse", index, len(models), f"SOCM of {model_id} on {len(pairs)} pairs")
        parts = ("collapse", f"{safe_name(model_id)}.parquet")
        if run.has(*parts) and not recompute:
            frame = run.load_frame(*parts)
        else:
            encoder = encoders.load_encoder(model_id, device=params.device)
            # token states stream to disk a chunk of texts at a time; SOCM reads them back per chunk of pairs
            with tempfile.TemporaryDirectory(prefix="tokens-", dir=scratch_dir()) as scratch:
                tokens = encoders.write_token_states(
                    encoder, [texts[i] for i in sample], Path(scratch) / "store", max_length=params.max_length
                )
                frame = collapse.pair_distances(tokens, pairs, device=params.device)
            frame["row_i"] = sample[frame["i"].to_numpy()]
            frame["row_j"] = sample[frame["j"].to_numpy()]
            if labels is not None:
                frame["same_label"] = labels[frame["row_i"]] == labels[frame["row_j"]]
            run.save_frame(frame, *parts)
            del encoder, tokens
        stats = collapse.collapse_summary(frame)
        row = {"model": model_id, "n_pairs": stats["n_pairs"], "n_texts": n}
        for quantity in ("socm", "d_mu", "d_sigma"):
            row.update({f"{quantity}_{name}": value for name, value in stats[quantity].items()})
        if "same_label" in frame:
            row["socm_same_label_mean"] = float(frame.loc[frame["same_label"], "socm"].mean())
            row["socm_different_label_mean"] = float(frame.loc[~frame["same_label"], "socm"].mean())
        summaries.append(row)
    run.save_frame(pd.DataFrame(summaries), "collapse", "summary.parquet")
    report("collapse", len(models), len(models), "collapse done")


def run_concentration(run: Run, models: list[str], texts: list[str], params: RunParams, report=None) -> None:
    """Layer-wise token concentration of each supported transformer model."""
    report = report or _no_report
    from flare_core import encoders
    from flare_core.analyses import concentration

    n = min(params.concentration_texts, len(texts))
    sample = np.sort(np.random.default_rng(params.seed + 1).choice(len(texts), size=n, replace=False))
    frames, skipped = [], {}
    for index, model_id in enumerate(models):
        report("concentration", index, len(models), f"layer-wise concentration of {model_id}")
        encoder = encoders.load_encoder(model_id, device=params.device)
        try:
            frame = concentration.layer_concentration(
                encoder.model, encoder.tokenizer, [texts[i] for i in sample], device=params.device
            )
        except concentration.UnsupportedArchitecture as exc:
            skipped[model_id] = str(exc)
            continue
        frame.insert(0, "model", model_id)
        frames.append(frame)
    if frames:
        run.save_frame(pd.concat(frames, ignore_index=True), "concentration.parquet")
    run.save_json({"texts": int(n), "skipped": skipped}, "concentration.json")
    report("concentration", len(models), len(models), "concentration done")


def summarise(run: Run) -> pd.DataFrame:
    """Join every per-model figure of the run into ``summary.parquet`` (one row per model)."""
    models = [m for m in run.manifest["models"] if m.get("status") == "done"]
    table = pd.DataFrame(
        {
            "model": [m["id"] for m in models],
            "role": [m.get("role", "candidate") for m in models],
            "dim": [m.get("dim") for m in models],
        }
    ).set_index("model")
    for estimator in ESTIMATORS:
        if run.has("sufficiency", estimator, "scores.parquet"):
            scores = run.load_frame("sufficiency", estimator, "scores.parquet").set_index("model")
            table[f"{estimator}_score"] = scores["score"]
            table[f"{estimator}_ci_low"] = scores["ci_low"]
            table[f"{estimator}_ci_high"] = scores["ci_high"]
            table[f"{estimator}_rank"] = scores["rank"]
    if run.has("collapse", "summary.parquet"):
        socm = run.load_frame("collapse", "summary.parquet").set_index("model")
        table["socm_mean"] = socm["socm_mean"]
    if run.has("geometry.parquet"):
        geometry = run.load_frame("geometry.parquet").set_index("model")
        for column in ("uniformity", "isoscore", "effective_rank", "silhouette"):
            if column in geometry:
                table[column] = geometry[column]
    if run.has("downstream.parquet"):
        downstream = run.load_frame("downstream.parquet").set_index("model")
        for column in downstream.columns:
            if pd.api.types.is_numeric_dtype(downstream[column]):
                table[column] = downstream[column]
    table = table.reset_index()
    run.save_frame(table, "summary.parquet")
    _correlations(run, table)
    _verdict(run)
    return table


LABEL_FREE_COLUMNS = ("socm_mean", "uniformity", "isoscore", "effective_rank", "silhouette", "dim")


def _correlations(run: Run, table: pd.DataFrame) -> None:
    """Every label-free score against every downstream score, across the run's candidate models."""
    from flare_core.analyses.correlate import correlation_table

    if not run.has("downstream.parquet"):
        return
    candidates = table[table["role"] == "candidate"].set_index("model")
    label_free = candidates[[c for c in LABEL_FREE_COLUMNS if c in candidates]].astype(float)
    for estimator in ESTIMATORS:
        if run.has("sufficiency", estimator, "all_scores.parquet"):
            variants = run.load_frame("sufficiency", estimator, "all_scores.parquet").set_index("model")
            variants = variants.select_dtypes("number").drop(columns=["index", "n_targets"], errors="ignore")
            label_free = label_free.join(variants.add_prefix(f"{estimator}_"), how="left")
    downstream = run.load_frame("downstream.parquet").set_index("model").select_dtypes("number")
    downstream = downstream[[c for c in downstream.columns if not c.startswith("n_")]]
    downstream = downstream.loc[downstream.index.intersection(candidates.index)]
    if len(downstream) < 3:
        return
    run.save_frame(correlation_table(label_free, downstream, seed=0), "correlations.parquet")


def _verdict(run: Run) -> None:
    from flare_core.analyses.correlate import ranking_correlation
    from flare_core.verdict import verdict

    available = [e for e in ESTIMATORS if run.has("sufficiency", e, "scores.parquet")]
    if not available:
        return
    estimator = available[0]
    scores = run.load_frame("sufficiency", estimator, "scores.parquet")
    digest = run.load_json("validation.json") if run.has("validation.json") else {}
    stability = None
    for row in digest.get(estimator, {}).get("subsampling", []):
        if abs(row["alpha"] - 0.2) < 1e-9:
            stability = row.get("rank_agreement")
    agreement = None
    if len(available) == 2:
        a, b = (
            run.load_frame("sufficiency", e, "scores.parquet").set_index("model")["score"] for e in available
        )
        agreement = ranking_correlation(a, b)
    failed = [m["id"] for m in run.manifest["models"] if m.get("status") == "failed"]
    run.save_json(
        verdict(scores, estimator=estimator, stability=stability, agreement=agreement, failed=failed),
        "verdict.json",
    )


def _downstream_series(run: Run) -> pd.Series | None:
    """The headline downstream score per model (classification accuracy, else STS Spearman), if any."""
    if not run.has("downstream.parquet"):
        return None
    downstream = run.load_frame("downstream.parquet").set_index("model")
    for column in ("accuracy", "cosine_spearman", "v_measure"):
        if column in downstream:
            return downstream[column].astype(float)
    return None


def validate_run(run: Run, studies: Sequence[str], *, repeats: int = 20, report=None) -> dict[str, Any]:
    """Compute the chosen validation studies for every estimator of ``run``; store and return a digest."""
    from flare_core import validation
    from flare_core.analyses import sufficiency

    report = report or _no_report
    unknown = sorted(set(studies) - set(validation.STUDIES))
    if unknown:
        raise ValueError(f"unknown validation studies {unknown}: choose from {list(validation.STUDIES)}")
    params = RunParams.from_dict(run.manifest["params"])
    downstream = _downstream_series(run)
    digest: dict[str, Any] = run.load_json("validation.json") if run.has("validation.json") else {}
    estimators = [e for e in ESTIMATORS if run.has("sufficiency", e, "scores.parquet")]
    for index, estimator in enumerate(estimators):
        report("validation", index, len(estimators) + 1, f"validation studies for {estimator}")
        result = sufficiency.SufficiencyResult.load(run.artefact("sufficiency", estimator, "result"))
        block = digest.setdefault(estimator, {})
        if "subsampling" in studies:
            frame = validation.subsampling_stability(
                result, repeats=repeats, seed=params.seed, downstream=downstream
            )
            run.save_frame(frame, "validation", f"{estimator}_subsampling.parquet")
            block["subsampling"] = (
                frame.groupby("alpha").mean(numeric_only=True).drop(columns="repeat").reset_index()
            )
        if "aggregation" in studies:
            frame = validation.aggregation_study(result, downstream=downstream)
            run.save_frame(frame, "validation", f"{estimator}_aggregation.parquet")
            block["aggregation"] = frame
        if "pool_size" in studies:
            per_dim = result.records.pivot(index="source", columns="target", values="is_per_dim")
            try:
                frame = validation.pool_size_study(per_dim, repeats=repeats, seed=params.seed)
            except ValueError as exc:
                block["pool_size_skipped"] = str(exc)
            else:
                run.save_frame(frame, "validation", f"{estimator}_pool_size.parquet")
                block["pool_size"] = (
                    frame.groupby("pool_size")["rank_agreement"].agg(["mean", "std"]).reset_index()
                )
    if "shuffle" in studies:
        ok = [m for m in run.embedded_models()]
        # seven retrainings of the matrix: a seeded sample of at most 2,000 texts, whatever the run used
        limit = min(params.max_texts_sufficiency or _SHUFFLE_TEXTS, _SHUFFLE_TEXTS)
        rows = _sufficiency_rows(len(run.corpus_frame()), limit, params.seed)
        embeddings = {m: np.asarray(run.load_embeddings(m, mmap=True)[rows]) for m in ok}
        frame = validation.shuffle_study(
            embeddings,
            # Flows, not mixtures: a mixture's conditional MLP out-fits its 8-mode marginal even when the
            # pairing is fully shuffled (0.097 nats/dim at p = 1 on the demo run), so only the flow
            # estimator can show the signal vanishing. The fast preset keeps the 7 retrainings affordable.
            estimator="flow",
            config=sufficiency.FlowConfig.fast(),
            seed=params.seed,
            progress=lambda done, total: report(
                "validation", len(estimators), len(estimators) + 1, f"shuffle study {done}/{total}"
            ),
        )
        run.save_frame(frame, "validation", "shuffle.parquet")
        digest["shuffle"] = frame
    report("validation", len(estimators) + 1, len(estimators) + 1, "validation done")
    digest = {k: _jsonable(v) for k, v in digest.items()}
    run.save_json(digest, "validation.json")
    return digest


def _jsonable(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return value.to_dict(orient="records")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
