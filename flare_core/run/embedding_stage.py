"""The embeddings stage: one unit per model, each streaming its embeddings into the shared cache.

The candidates go first, the quickest first (by the plan's cost of each model: a static model before a
small transformer before a large one), then the other models (partial models, controls, references),
also quickest first. The answer needs the candidates alone, and a first answer needs only the quick ones:
``on_some_candidates`` is called as soon as the quick group is stored (:func:`quick_group_done`) and again
after each slower candidate, and ``on_candidates`` once every candidate is stored (or has failed), while
the other models are still to come."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flare_core.compute import Executor, LocalExecutor, Outcome, Resources
from flare_core.compute.scheduler import Task, Unit, run_units
from flare_core.encoders.extra_models import distil_build_seconds
from flare_core.errors import Cancelled
from flare_core.run.eta import (
    embedding_cost,
    measured_cost,
    model_embedding_units,
    seconds_to_units,
    text_units,
)
from flare_core.run.params import RunParams
from flare_core.store.cache_folder import cache_root
from flare_core.store.manifest import record_worker, roles, set_model
from flare_core.store.runs import Run

#: A first answer compares candidates: it waits for at least this many embedded ones.
MIN_ANSWERED = 2
#: A run keeps a model's speed as this machine's when it embedded at least this many texts.
MIN_MEASURED_TEXTS = 100


@dataclass(frozen=True)
class EmbedUnit(Unit):
    """Embed the corpus with one model."""

    model: str


def embedding_stage(
    run: Run,
    params: RunParams,
    texts: list[str],
    report: Callable[..., None],
    executor: Executor | None = None,
    on_candidates: Callable[[], None] | None = None,
    on_some_candidates: Callable[[bool], None] | None = None,
    costs: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Embed the corpus with every model not stored yet, one :class:`EmbedUnit` per model on ``executor``,
    in :func:`embedding_order`; ``on_candidates()`` runs as soon as every candidate is stored or failed,
    ``on_some_candidates(first)`` before that, while candidates are still to embed: once the quick group is
    stored (``first`` true) and then after each candidate that joins it (see :func:`quick_group_done`).

    Each unit streams its embeddings into the shared embedding cache and returns the file; the run
    store then copies it. With no executor (or a serial local one) the units run here, in order, with
    per-batch progress; on a pool or cluster they run side by side and report when each finishes.
    Progress counts in the units of the run's plan: each model's ``costs`` (:func:`embedding_costs`).
    """
    models = run.manifest["models"]
    todo = []
    for model in models:
        if run.embedding_path(model["id"]).exists():
            array = run.load_embeddings(model["id"], mmap=True)
            set_model(run, model["id"], status="done", dim=int(array.shape[1]))
        else:
            todo.append(model["id"])
    report("embeddings", len(models) - len(todo), len(models), f"embedding with {len(todo)} models")
    ex = executor or LocalExecutor()
    handler = _EmbeddingHandler(
        run,
        params,
        texts,
        report,
        ex,
        done=len(models) - len(todo),
        on_candidates=on_candidates,
        on_some_candidates=on_some_candidates,
        costs=costs or embedding_costs(run, params),
    )
    role_of = roles(run)
    todo = embedding_order(todo, role_of, handler.units)
    handler.candidates_left = {m for m in todo if role_of[m] == "candidate"}
    handler.candidates_done = [m for m in role_of if role_of[m] == "candidate" and m not in todo]
    try:
        handler.answer_when_ready()  # candidates stored by an earlier attempt: an answer now
        run_units(ex, [EmbedUnit(m) for m in todo], handler, poll=0.5 if ex.remote else None)
    finally:
        if executor is None:
            ex.close()
    report(
        "embeddings",
        len(models),
        len(models),
        "embeddings done",
        work_done=round(handler.work_finished),
        work_total=handler.work_total,
    )


def embedding_order(models: list[str], role_of: dict[str, str], cost: Callable[[str], float]) -> list[str]:
    """``models`` in the order they are embedded: the candidates first (``role_of``: model → role), then
    the others (partial models, controls, references), each group by ``cost(model)`` (the plan's units),
    cheapest first; equal costs keep the given order."""
    return sorted(models, key=lambda m: (role_of[m] != "candidate", cost(m)))


def quick_group_done(done: Sequence[float], left: Sequence[float], *, embedded: int) -> bool:
    """Whether the candidates finished so far are the quick group, the one the first answer is given from:
    at least :data:`MIN_ANSWERED` of them are embedded (``embedded``), some are still to come, and the
    cheapest one left costs more than all those finished together (``done`` and ``left``: the plan's units of
    each, loading and reading). Waiting for the next one would then at least double the time to the answer;
    each candidate after it joins the answer as it comes."""
    return embedded >= MIN_ANSWERED and bool(left) and min(left) > sum(done)


class _EmbeddingHandler:
    """Runs :class:`EmbedUnit` tasks and stores each model's embeddings (or its error) in the run."""

    def __init__(
        self,
        run: Run,
        params: RunParams,
        texts: list[str],
        report: Callable[..., None],
        executor: Executor,
        *,
        done: int,
        on_candidates: Callable[[], None] | None = None,
        on_some_candidates: Callable[[bool], None] | None = None,
        costs: dict[str, tuple[float, float]],
    ) -> None:
        self.run, self.params, self.report = run, params, report
        self.on_candidates, self.on_some_candidates = on_candidates, on_some_candidates
        self.candidates_left: set[str] = set()
        self.candidates_done: list[str] = []  # stored or failed
        self.answered = False  # a first answer was given from the quick group
        self.total, self.done = len(run.manifest["models"]), done
        # progress in units of the time plan (``run.eta``): loading a model, then 100 characters read, each
        # weighted by the model's cost (all-mpnet-base-v2 reads a text in ~7 times all-MiniLM-L6-v2's time)
        self.n_texts = len(texts)
        corpus_units = text_units(texts, params.max_length)
        units = model_embedding_units(costs, corpus_units)
        self.load_units = {model: load for model, (load, _) in units.items()}
        self.read_units = {model: read for model, (_, read) in units.items()}
        self.work_total = round(sum(self.load_units.values()) + sum(self.read_units.values()))
        self.work_finished = sum(
            self.load_units[m["id"]] + self.read_units[m["id"]]
            for m in run.manifest["models"]
            if m.get("status") == "done"
        )
        self.building = {m["id"] for m in run.manifest["models"] if distil_build_seconds(m["id"]) > 0}
        self.in_process = not executor.remote
        self.texts = executor.put(texts)
        wants_gpu = not self.in_process and params.device is not None and params.device.startswith("cuda")
        self.resources = Resources(num_cpus=1.0, num_gpus=1.0 if wants_gpu else 0.0)
        self.corpus_hash = run.manifest["corpus"]["content_hash"]

    def units(self, model_id: str) -> float:
        """The plan's units of embedding ``model_id`` (loading and reading)."""
        return self.load_units[model_id] + self.read_units[model_id]

    def answer_when_ready(self) -> None:
        """Call ``on_candidates`` (once) when no candidate is left to embed; before that, call
        ``on_some_candidates`` once the quick group is in (:func:`quick_group_done`) and after each candidate
        that joins it."""
        if not self.candidates_left:
            if self.on_candidates is not None:
                on_candidates, self.on_candidates = self.on_candidates, None
                on_candidates()
            return
        if self.on_some_candidates is None:
            return
        first = not self.answered
        if first:
            status = {m["id"]: m.get("status") for m in self.run.manifest["models"]}
            embedded = sum(status.get(m) == "done" for m in self.candidates_done)
            done = [self.units(m) for m in self.candidates_done]
            left = [self.units(m) for m in self.candidates_left]
            if not quick_group_done(done, left, embedded=embedded):
                return
            self.answered = True
        self.on_some_candidates(first)

    def pending(self, unit: EmbedUnit) -> EmbedUnit:
        return unit

    def task(self, unit: EmbedUnit) -> Task:
        params = self.params
        progress = functools.partial(self._batch_done, unit.model) if self.in_process else None
        args = (
            unit.model,
            self.texts,
            self.corpus_hash,
            str(cache_root() / "embeddings"),
            params.device,
            params.batch_size,
            params.max_length,
            progress,
        )
        return Task(_embed_task, args, self.resources)

    def _batch_done(self, model_id: str, done: int, total: int) -> None:
        message = f"{model_id}: {done}/{total} texts"
        work = round(
            self.work_finished + self.load_units[model_id] + self.read_units[model_id] * done / total
        )
        self.report(
            "embeddings",
            self.done,
            self.total,
            message,
            model=model_id,
            work_done=work,
            work_total=self.work_total,
        )

    def finish(self, unit: EmbedUnit, outcome: Outcome) -> None:
        run, model_id = self.run, unit.model
        record_worker(run, "embeddings", model_id, outcome.worker, outcome.seconds, outcome.ok)
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
                set_model(run, model_id, status="done", dim=dim, **info)
                self._keep_speed(model_id, info)
        if error is not None:
            set_model(run, model_id, status="failed", error=f"{type(error).__name__}: {error}")
        self.done += 1
        self.work_finished += self.load_units[model_id] + self.read_units[model_id]
        self.report(
            "embeddings",
            self.done,
            self.total,
            f"{model_id} {'done' if error is None else 'failed'}",
            work_done=round(self.work_finished),
            work_total=self.work_total,
        )
        if model_id in self.candidates_left:
            self.candidates_left.discard(model_id)
            self.candidates_done.append(model_id)
            self.answer_when_ready()

    def _keep_speed(self, model_id: str, info: dict[str, Any]) -> None:
        """Keep the speed this run measured for the registry model ``model_id`` as this machine's (the New run
        page and the next run's plan read it): not a cache hit's, nor one over fewer than
        :data:`MIN_MEASURED_TEXTS` texts; the load time not when it included building the model (a distil
        built on first use)."""
        from flare_core.encoders import get_spec
        from flare_core.encoders.cost import keep_run_speed

        if info.get("from_cache") or self.n_texts < MIN_MEASURED_TEXTS or not info.get("chars_per_s"):
            return
        try:
            get_spec(model_id)
        except ValueError:  # a local folder or a hub id: no registry entry to keep a speed under
            return
        record = {k: info[k] for k in ("texts_per_s", "chars_per_s", "load_s", "embed_s") if k in info}
        if model_id in self.building:
            record.pop("load_s", None)
        keep_run_speed(model_id, record, self.n_texts, self.params.device)

    def check_stop(self) -> None:
        self.run.check_cancelled()


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

    Returns the cache file's ``path`` and what the run records about the model, its cost included
    (:mod:`flare_core.encoders.cost`: texts per second over this unit's own embedding time, load time,
    peak memory, size, bytes per vector; the figures stored with the cache entry when it was a hit).
    """
    from flare_core import encoders
    from flare_core.encoders.cost import timed_embedding
    from flare_core.encoders.embedding_cache import annotate_entry, entry_meta

    started = time.perf_counter()

    def load() -> Any:
        encoder = encoders.load_encoder(model_id, device=device, corpus_texts=texts)
        if progress is not None:  # loaded: its load counts as done before its first batch
            progress(0, len(texts))
        return encoder

    def embed(encoder: Any) -> Any:
        return encoders.embed(
            encoder,
            texts,
            corpus_hash=corpus_hash,
            cache_dir=cache,
            batch_size=batch_size,
            max_length=max_length,
            progress=progress,
        )

    array, encoder, cost = timed_embedding(
        model_id,
        texts,
        embed,
        load=load,
        device=device,
        cached=lambda enc: entry_meta(enc, corpus_hash, cache, max_length),
    )
    if not cost.get("from_cache"):
        annotate_entry(encoder, corpus_hash, cache, max_length, {"cost": cost})
    spec = encoder.spec
    return {
        "path": str(array.filename),
        "encoder_kind": _encoder_kind(encoder),
        "source": spec.source,
        "revision": spec.revision,
        "layers": spec.layers,
        "reads": spec.reads,
        "seconds": round(time.perf_counter() - started, 3),
        **cost,
        "device": str(getattr(encoder, "device", None) or device or "cpu"),
    }


def _encoder_kind(encoder: Any) -> str:
    from flare_core.encoders import TransformerEncoder

    return "transformer" if isinstance(encoder, TransformerEncoder) else encoder.spec.kind


def model_cost(
    model: dict[str, Any], measured: dict[str, Any] | None = None, *, cached: bool = False
) -> tuple[float, float]:
    """The model's cost of embedding: ``(weight, load_units)``. From its speed ``measured`` on this machine
    when there is one (:func:`~flare_core.run.eta.measured_cost`), else the prior of its kind
    (:func:`~flare_core.run.eta.embedding_cost`); a model whose embeddings of the corpus are ``cached``
    reads nothing. A distilled static model not built yet also loads for its share of the build (the
    forward pass over the vocabulary)."""
    from flare_core.encoders import get_spec
    from flare_core.encoders.extra_models import distil_build_seconds

    if model.get("kind") == "precomputed":
        return 0.0, 0.0
    try:
        spec = get_spec(model["id"])
    except ValueError:  # hub ids and local folders: priced like all-MiniLM-L6-v2
        spec = None
    found = measured_cost(getattr(spec, "kind", None), measured, cached=cached)
    weight, load = found if found is not None else embedding_cost(spec)
    if cached and found is None:
        weight = 0.0
    return weight, load + seconds_to_units(distil_build_seconds(model["id"]) if spec is not None else 0.0)


def embedding_costs(run: Run, params: RunParams) -> dict[str, tuple[float, float]]:
    """Each model's :func:`model_cost` in ``run``: from the speeds measured on this machine (by ``flare
    models --measure`` and by earlier runs) and whether its embeddings of this corpus are cached."""
    from flare_core.encoders.cost import load_measurements
    from flare_core.encoders.embedding_cache import cached_models
    from flare_core.encoders.model_costs import this_device_kind

    models = run.manifest["models"]
    stored = load_measurements().get(this_device_kind(params.device), {})
    cached = cached_models(
        [m["id"] for m in models],
        run.manifest["corpus"]["content_hash"],
        cache_root() / "embeddings",
        params.max_length,
    )
    return {m["id"]: model_cost(m, stored.get(m["id"]), cached=m["id"] in cached) for m in models}


def token_model(run: Run, model_id: str) -> tuple[float, int]:
    """``(weight, width)`` of a model whose token states a run reads: its :func:`model_cost` weight and
    its embedding width (384 when unknown before it is embedded)."""
    from flare_core.encoders import get_spec

    model = next((m for m in run.manifest["models"] if m["id"] == model_id), {"id": model_id})
    width = model.get("dim")
    if not width:
        try:
            width = get_spec(model_id).dim
        except ValueError:
            width = None
    return model_cost(model)[0], int(width or 384)
