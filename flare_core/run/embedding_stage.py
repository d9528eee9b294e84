"""The embeddings stage: one unit per model, each streaming its embeddings into the shared cache."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from flare_core.errors import Cancelled
from flare_core.run.manifest import record_worker, set_model
from flare_core.run.params import RunParams
from flare_core.store.cache import cache_root
from flare_core.store.runs import Run


def embedding_stage(
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
            set_model(run, model_id, status="done", dim=int(array.shape[1]))
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
            if error is not None:
                set_model(run, model_id, status="failed", error=f"{type(error).__name__}: {error}")
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
