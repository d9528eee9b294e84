"""What a model costs: its speed on a corpus, its peak memory, its size, and the bytes each vector takes.

Every figure names its unit: ``texts_per_s`` and ``chars_per_s`` (texts and characters embedded per second,
model loading excluded, on this machine and device; for a model fitted on the corpus, its fit counts as
embedding time), ``load_s`` (seconds to load or fit the model),
``peak_memory_mib`` (the most resident memory the process held above what it held before loading, MiB),
``model_size_mib`` (the model's files on disk, or its parameters for a model fitted on the corpus or built
at load time: ``size_from``), ``bytes_per_vector_float32`` (4 × width) and ``bytes_per_vector_int8``
(width: one byte per dimension after scalar quantisation).

``flare models --measure`` measures the whole registry on a standard sample and keeps the figures in
``<cache>/model_costs.json`` (one entry per device kind), so the New run page can show the expected time
before a run starts.
"""

from __future__ import annotations

import gc
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flare_core.checks import check_int
from flare_core.store import atomic
from flare_core.store.cache_folder import cache_root

MEASUREMENTS = "model_costs.json"
_MIB = 2**20
#: Seconds between two readings of the resident memory while a model loads and embeds.
_SAMPLE_SECONDS = 0.02


def rss_bytes() -> int:
    """The resident memory of this process now, in bytes (Linux ``/proc``; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        scale = 1 if platform.system() == "Darwin" else 1024
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def _release_free_memory() -> None:
    """Hand memory freed by earlier work back to the system (glibc's ``malloc_trim``), so that a block's
    own allocations show as growth instead of silently reusing it; nothing where glibc is absent."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Context manager: ``peak_mib`` is the highest resident memory reached inside the block above the
    memory held on entry, read every 20 ms by a thread (and once more on exit). Memory freed before the
    block is handed back to the system first; what the block reuses of memory still held (a library's
    own caches) is not counted, so the figure is a lower bound."""

    def __init__(self) -> None:
        self.start = self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PeakMemory:
        _release_free_memory()
        self.start = self.peak = rss_bytes()
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(_SAMPLE_SECONDS):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def peak_mib(self) -> float:
        return round(max(0, self.peak - self.start) / _MIB, 1)


def vector_bytes(dim: int) -> dict[str, int]:
    """``bytes_per_vector_float32`` (4 × ``dim``) and ``bytes_per_vector_int8`` (``dim``)."""
    check_int(dim, "dim", min_value=1)
    return {"bytes_per_vector_float32": 4 * dim, "bytes_per_vector_int8": dim}


def files_bytes(paths: Sequence[Path]) -> int:
    """Total size in bytes of the existing files among ``paths``."""
    return int(sum(p.stat().st_size for p in paths if p.is_file()))


def parameter_bytes(encoder: Any) -> int:
    """Bytes of the parameters an encoder holds in memory: its own ``parameter_bytes()`` (fastText), a
    torch model's parameters and buffers, TF-IDF's vocabulary weights and SVD components, or Doc2Vec's
    word, document and output vectors; 0 when none of these applies."""
    own = getattr(encoder, "parameter_bytes", None)
    if callable(own):
        return int(own())
    model = getattr(encoder, "model", None)
    if hasattr(model, "parameters") and hasattr(model, "buffers"):
        tensors = [*model.parameters(), *model.buffers()]
        return int(sum(t.numel() * t.element_size() for t in tensors))
    svd = getattr(encoder, "svd", None)
    if svd is not None:
        idf = getattr(getattr(encoder, "vectorizer", None), "idf_", np.zeros(0))
        return int(svd.components_.nbytes + idf.nbytes)
    if model is not None and hasattr(model, "dv") and hasattr(model, "wv"):
        arrays = (model.dv.vectors, model.wv.vectors, getattr(model, "syn1neg", np.zeros(0)))
        return int(sum(a.nbytes for a in arrays))
    return 0


def model_size(model_id: str, encoder: Any = None) -> tuple[float | None, str | None]:
    """``(model_size_mib, size_from)``: the registry model's files on disk (``"files"``), else the
    parameters of the loaded ``encoder`` (``"parameters"``), else ``(None, None)``."""
    from flare_core.encoders.model_pool import POOL

    entry = POOL.get(model_id)
    size = files_bytes(entry.files()) if entry is not None else 0
    if size:
        return round(size / _MIB, 2), "files"
    size = parameter_bytes(encoder) if encoder is not None else 0
    return (round(size / _MIB, 2), "parameters") if size else (None, None)


def cost_record(
    model_id: str,
    encoder: Any,
    texts: Sequence[str],
    *,
    dim: int,
    load_s: float,
    embed_s: float,
    peak_mib: float | None,
    device: str | None,
) -> dict[str, Any]:
    """The cost fields of one model's embedding of ``texts`` (see the module docstring)."""
    chars = sum(len(t) for t in texts)
    size, size_from = model_size(model_id, encoder)
    # a model fitted on the corpus learns while it loads: its fit is part of embedding the corpus
    fitted = getattr(getattr(encoder, "spec", None), "kind", None) == "corpus"
    seconds = max(embed_s + (load_s if fitted else 0.0), 1e-6)
    return {
        "texts_per_s": round(len(texts) / seconds, 2),
        "chars_per_s": round(chars / seconds, 1),
        "load_s": round(load_s, 3),
        "embed_s": round(embed_s, 3),
        "peak_memory_mib": peak_mib,
        "model_size_mib": size,
        "size_from": size_from,
        **vector_bytes(int(dim)),
        "device": device or "cpu",
    }


def timed_embedding(
    model_id: str,
    texts: Sequence[str],
    embed: Callable[[Any], np.ndarray],
    *,
    load: Callable[[], Any],
    device: str | None,
    cached: Callable[[Any], dict[str, Any] | None] | None = None,
) -> tuple[np.ndarray, Any, dict[str, Any]]:
    """Load a model with ``load()``, embed with ``embed(encoder)`` and measure both:
    ``(embeddings (N, d), encoder, cost fields)``. The peak memory covers loading and embedding.

    ``cached(encoder)``, called once the model is loaded, returns the embedding cache's sidecar when
    ``embed`` will read the result from the cache: the cost fields are then the ones stored with that
    entry when it was computed (``from_cache`` true; its ``seconds`` when it stored none), with the load
    time measured now."""
    with PeakMemory() as memory, _GpuPeak(device) as gpu:
        start = time.perf_counter()
        encoder = load()
        loaded = time.perf_counter()
        hit = cached(encoder) if cached is not None else None
        array = embed(encoder)
        done = time.perf_counter()
    dim = int(array.shape[1])
    if hit is not None:
        stored = hit.get("cost")
        fields = (
            dict(stored)
            if isinstance(stored, dict)
            else cost_record(
                model_id,
                encoder,
                texts,
                dim=dim,
                load_s=0.0,
                embed_s=float(hit.get("seconds") or 0.0),
                peak_mib=None,
                device=None,
            )
        )
        return array, encoder, fields | {"load_s": round(loaded - start, 3), "from_cache": True}
    fields = cost_record(
        model_id,
        encoder,
        texts,
        dim=dim,
        load_s=loaded - start,
        embed_s=done - loaded,
        peak_mib=memory.peak_mib,
        device=device,
    )
    if gpu.peak_mib is not None:
        fields["gpu_peak_memory_mib"] = gpu.peak_mib
    return array, encoder, fields


class _GpuPeak:
    """The peak GPU memory torch allocated inside the block (MiB), on a CUDA ``device``; else None."""

    def __init__(self, device: str | None) -> None:
        self.cuda = device_kind(device) == "cuda"
        self.peak_mib: float | None = None

    def __enter__(self) -> _GpuPeak:
        if self.cuda:
            import torch

            self.cuda = torch.cuda.is_available()
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            import torch

            self.peak_mib = round(torch.cuda.max_memory_allocated() / _MIB, 1)


# ------------------------------------------------------------------------------ the stored measurements


def measurements_path() -> Path:
    """``<cache>/model_costs.json``."""
    return cache_root() / MEASUREMENTS


def device_kind(device: str | None) -> str:
    """``"cpu"``, ``"cuda"`` or ``"mps"``: the kind of a device name (``"cuda:1"`` → ``"cuda"``)."""
    return (device or "cpu").split(":")[0]


def load_measurements() -> dict[str, dict[str, dict[str, Any]]]:
    """``{device kind: {model id: record}}`` from ``<cache>/model_costs.json`` (empty when missing or
    unreadable)."""
    import json

    try:
        stored = json.loads(measurements_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = stored.get("devices") if isinstance(stored, dict) else None
    return found if isinstance(found, dict) else {}


def save_measurements(records: dict[str, dict[str, Any]], device: str | None) -> Path:
    """Merge ``records`` (model id → record) into the stored measurements of ``device``'s kind."""
    stored = load_measurements()
    stored.setdefault(device_kind(device), {}).update(records)
    return atomic.write_json(measurements_path(), {"version": 1, "devices": stored})


def keep_run_speed(model_id: str, record: dict[str, Any], n_texts: int, device: str | None) -> None:
    """Keep the speed a run measured for ``model_id`` on ``n_texts`` texts as this machine's figure for
    ``device``'s kind (``from`` ``"run"``), the fields it lacks (a load time that included a build) kept
    from the figure before; under the store's lock, so that two runs finishing at once both count."""
    from flare_core.store.locks import file_lock

    kind = device_kind(str(_default_device(device)))
    with file_lock(measurements_path().with_suffix(".lock")):
        before = load_measurements().get(kind, {}).get(model_id, {})
        fields = {
            **before,
            **record,
            "texts": int(n_texts),
            "from": "run",
            "host": platform.node(),
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        save_measurements({model_id: fields}, kind)


def _default_device(device: str | None) -> str:
    from flare_core.device import pick_device

    return str(pick_device(device))


def measure_models(
    model_ids: Sequence[str],
    texts: Sequence[str],
    *,
    device: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Measure each model on ``texts`` (no embedding cache): ``{model id: cost fields, plus "texts",
    "host", "measured"}``, or ``{"error": ...}`` for a model that could not be loaded or run."""
    from flare_core.encoders.registry import load_encoder
    from flare_core.errors import ModelUnavailable

    items = list(texts)
    if len(items) < 2:
        raise ValueError(f"measuring needs at least 2 texts, got {len(items)}")
    out = {}
    for model_id in model_ids:
        if progress is not None:
            progress(f"measuring {model_id} on {len(items)} texts")
        try:
            _, _, fields = timed_embedding(
                model_id,
                items,
                lambda enc: np.asarray(enc.encode(items)),
                load=lambda m=model_id: load_encoder(m, device=device, corpus_texts=items),
                device=device,
            )
        except (ModelUnavailable, ValueError, RuntimeError, OSError) as exc:
            out[model_id] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        out[model_id] = fields | {
            "texts": len(items),
            "host": platform.node(),
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        gc.collect()
    return out


def expected_seconds(record: dict[str, Any], texts: Sequence[str]) -> float | None:
    """Seconds a model of measured ``record`` should take to load and embed ``texts``: its load time plus
    their characters over its characters per second (None when the record has no speed)."""
    speed = record.get("chars_per_s")
    if not speed:
        return None
    return float(record.get("load_s") or 0.0) + sum(len(t) for t in texts) / float(speed)
