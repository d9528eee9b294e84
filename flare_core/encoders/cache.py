"""On-disk embedding cache: one ``<key>.npy`` (float32 (N, d)) plus a ``<key>.json`` sidecar per entry."""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import atomic
from .base import Encoder, ProgressFn, check_batch_size, check_max_length, check_texts

log = logging.getLogger(__name__)


def pooling_of(encoder: Encoder) -> str:
    """The encoder's pooling name (``encoder.pooling``), or its class name when it has none."""
    return str(getattr(encoder, "pooling", None) or type(encoder).__name__)


def cache_key_fields(encoder: Encoder, corpus_hash: str, max_length: int | None) -> dict[str, object]:
    """The fields an embedding-cache key is made of."""
    return {
        "corpus_hash": corpus_hash,
        "model_id": encoder.spec.id,
        "revision": encoder.spec.revision,
        "pooling": pooling_of(encoder),
        "max_length": max_length,
    }


def cache_key(fields: dict[str, object]) -> str:
    """sha256 (hex) of the canonical JSON of the key fields."""
    canon = json.dumps(
        [fields[k] for k in ("corpus_hash", "model_id", "revision", "pooling", "max_length")],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def cache_paths(cache_dir: str | Path, key: str) -> tuple[Path, Path]:
    """(``<cache_dir>/<key>.npy``, ``<cache_dir>/<key>.json``)."""
    base = Path(cache_dir)
    return base / f"{key}.npy", base / f"{key}.json"


def _supports_max_length(encoder: Encoder) -> bool:
    try:
        params = inspect.signature(encoder.encode).parameters
    except (TypeError, ValueError):
        return False
    return "max_length" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _read_cached(npy: Path, sidecar: Path, n: int, fields: dict[str, object]) -> np.ndarray | None:
    if not npy.is_file() or not sidecar.is_file():
        return None
    try:
        meta = json.loads(sidecar.read_text())
        arr = atomic.read_npy(npy)
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable embedding cache entry %s: %s", npy.name, exc)
        return None
    if any(meta.get(k) != v for k, v in fields.items()):
        log.warning("ignoring embedding cache entry %s: its sidecar does not match the key", npy.name)
        return None
    if arr.ndim != 2 or arr.shape[0] != n or arr.dtype != np.float32 or not np.isfinite(arr).all():
        log.warning(
            "ignoring embedding cache entry %s: shape %s / dtype %s is not as expected",
            npy.name,
            arr.shape,
            arr.dtype,
        )
        return None
    return arr


def embed(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    corpus_hash: str,
    cache_dir: str | Path | None,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: ProgressFn | None = None,
) -> np.ndarray:
    """Embeddings of ``texts`` by ``encoder``: float32 (N, d), read from the cache when present.

    The key is sha256 of (corpus_hash, model id, spec.revision, pooling, max_length); ``corpus_hash``
    must identify ``texts`` exactly (content and order). ``cache_dir=None`` disables caching. A cache
    hit calls ``progress(N, N)`` once and runs no model.
    """
    items = check_texts(texts)
    batch_size = check_batch_size(batch_size)
    max_length = check_max_length(max_length)
    if not isinstance(corpus_hash, str) or not corpus_hash:
        raise ValueError("corpus_hash must be a non-empty string")
    if not hasattr(encoder, "encode") or not hasattr(encoder, "spec"):
        raise ValueError(f"encoder must have .spec and .encode, got {type(encoder).__name__}")
    kwargs: dict[str, object] = {"batch_size": batch_size, "progress": progress}
    if max_length is not None:
        if not _supports_max_length(encoder):
            raise ValueError(f"encoder {encoder.spec.id!r} does not accept max_length")
        kwargs["max_length"] = max_length

    if cache_dir is None:
        return _checked(encoder.encode(items, **kwargs), len(items), encoder)

    fields = cache_key_fields(encoder, corpus_hash, max_length)
    key = cache_key(fields)
    npy, sidecar = cache_paths(cache_dir, key)
    cached = _read_cached(npy, sidecar, len(items), fields)
    if cached is not None:
        if progress is not None:
            progress(len(items), len(items))
        return cached

    start = time.perf_counter()
    emb = _checked(encoder.encode(items, **kwargs), len(items), encoder)
    seconds = time.perf_counter() - start
    # the revision of fit-on-use encoders (tfidf-svd) changes when they fit; the key stays the one looked up
    atomic.write_npy(npy, emb)
    meta = dict(fields)
    meta.update(
        key=key,
        n_rows=int(emb.shape[0]),
        dim=int(emb.shape[1]),
        dtype="float32",
        seconds=round(seconds, 4),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        revision_after=encoder.spec.revision,
    )
    atomic.write_json(sidecar, meta)
    return emb


def _checked(emb: np.ndarray, n: int, encoder: Encoder) -> np.ndarray:
    arr = np.asarray(emb)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise RuntimeError(f"encoder {encoder.spec.id!r} returned shape {arr.shape} for {n} texts")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise RuntimeError(f"encoder {encoder.spec.id!r} returned non-finite values")
    return arr
