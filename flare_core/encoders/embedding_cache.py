"""On-disk embedding cache: one ``<key>.npy`` (float32 (N, d)) plus a ``<key>.json`` sidecar per entry.

Entries are written chunk by chunk and returned as read-only memmaps, so embedding a corpus takes
memory for one chunk of texts, not for N rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from flare_core.checks import check_int
from flare_core.encoders.base import Encoder, ProgressFn, check_batch_size, check_max_length, check_texts
from flare_core.store import atomic

log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 4096


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


def entry_meta(
    encoder: Encoder, corpus_hash: str, cache_dir: str | Path, max_length: int | None
) -> dict[str, object] | None:
    """The sidecar of the cache entry ``embed`` would read for ``encoder`` (as loaded) and the corpus,
    or None when there is no such entry (its sidecar missing, unreadable or for another key)."""
    fields = cache_key_fields(encoder, corpus_hash, max_length)
    npy, sidecar = cache_paths(cache_dir, cache_key(fields))
    try:
        meta = json.loads(sidecar.read_text()) if npy.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or any(meta.get(k) != v for k, v in fields.items()):
        return None
    return meta


def annotate_entry(
    encoder: Encoder,
    corpus_hash: str,
    cache_dir: str | Path,
    max_length: int | None,
    extra: dict[str, object],
) -> None:
    """Add ``extra`` fields (what computing the entry cost) to the sidecar of an existing cache entry."""
    meta = entry_meta(encoder, corpus_hash, cache_dir, max_length)
    if meta is not None:
        _, sidecar = cache_paths(cache_dir, cache_key(cache_key_fields(encoder, corpus_hash, max_length)))
        atomic.write_json(sidecar, {**meta, **extra})


def cached_models(
    model_ids: Sequence[str], corpus_hash: str, cache_dir: str | Path, max_length: int | None
) -> set[str]:
    """The registry models of ``model_ids`` whose embeddings of the corpus ``corpus_hash`` (at
    ``max_length``) are in the cache, their revision today's (a model fitted on the corpus: the revision of
    its kind, before the fit's part): read from the entries' sidecars, without loading any model (a model
    outside the registry counts as not cached)."""
    from flare_core.encoders.registry import get_spec

    revisions = {}
    for model in model_ids:
        try:
            spec = get_spec(model)
        except ValueError:
            continue
        revisions[model] = _fit_free(spec.revision)
    found: set[str] = set()
    for sidecar in Path(cache_dir).glob("*.json") if revisions else ():
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        model = meta.get("model_id") if isinstance(meta, dict) else None
        if (
            model in revisions
            and meta.get("corpus_hash") == corpus_hash
            and meta.get("max_length") == max_length
            and _fit_free(meta.get("revision")) == revisions[model]
            and sidecar.with_suffix(".npy").is_file()
        ):
            found.add(model)
    return found


def _fit_free(revision: object) -> str:
    """A corpus-fitted model's revision without the part naming its fit (``"...|fit:<hash>"``)."""
    return str(revision).split("|fit:")[0]


def supports_max_length(encoder: Encoder) -> bool:
    """Whether ``encoder.encode`` takes ``max_length`` (named, or through ``**kwargs``)."""
    try:
        params = inspect.signature(encoder.encode).parameters
    except (TypeError, ValueError):
        return False
    return "max_length" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _read_cached(npy: Path, sidecar: Path, n: int, fields: dict[str, object]) -> np.ndarray | None:
    """The cached (n, d) float32 array as a read-only memmap, or ``None`` when absent or not usable.

    Finiteness is checked in row blocks read from the file, so a hit costs little memory at any N.
    """
    if not npy.is_file() or not sidecar.is_file():
        return None
    try:
        meta = json.loads(sidecar.read_text())
        arr = np.load(npy, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable embedding cache entry %s: %s", npy.name, exc)
        return None
    if not isinstance(meta, dict) or any(meta.get(k) != v for k, v in fields.items()):
        log.warning("ignoring embedding cache entry %s: its sidecar does not match the key", npy.name)
        return None
    if arr.ndim != 2 or arr.shape[0] != n or arr.dtype != np.float32 or not arr.flags.c_contiguous:
        log.warning(
            "ignoring embedding cache entry %s: shape %s / dtype %s is not as expected",
            npy.name,
            arr.shape,
            arr.dtype,
        )
        return None
    try:
        finite = all(np.isfinite(block).all() for block in atomic.npy_blocks(npy))
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable embedding cache entry %s: %s", npy.name, exc)
        return None
    if not finite:
        log.warning("ignoring embedding cache entry %s: it holds non-finite values", npy.name)
        return None
    return arr


def check_chunk_size(chunk_size: int) -> int:
    """Validate a number of texts encoded per call (a positive int)."""
    return check_int(chunk_size, "chunk_size", min_value=1)


def embed(
    encoder: Encoder,
    texts: Sequence[str],
    *,
    corpus_hash: str,
    cache_dir: str | Path | None,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: ProgressFn | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> np.ndarray:
    """Embeddings of ``texts`` by ``encoder``: float32 (N, d), read from the cache when present.

    The key is sha256 of (corpus_hash, model id, spec.revision, pooling, max_length); ``corpus_hash``
    must identify ``texts`` exactly (content and order). ``cache_dir=None`` disables caching and
    returns an in-memory array. With a cache the result is a read-only ``np.memmap`` of the cache
    file: texts are encoded ``chunk_size`` at a time and each chunk is appended to a temporary file
    renamed into place when complete, so memory does not grow with N. Entries are only ever replaced
    by renaming, so a memmap stays valid when its entry is rewritten or deleted (never truncate or
    rewrite cache files in place while they may be mapped). A cache hit calls ``progress(N, N)`` once
    and runs no model; otherwise ``progress(done, N)`` counts over the corpus.

    An encoder fitted on the texts it embeds (``fitted`` false and a ``fit`` method, as tfidf-svd
    loaded without ``corpus_texts``) is fitted on the whole corpus before the first chunk, so the
    result does not depend on ``chunk_size``.
    """
    items = check_texts(texts)
    batch_size = check_batch_size(batch_size)
    max_length = check_max_length(max_length)
    chunk_size = check_chunk_size(chunk_size)
    if not isinstance(corpus_hash, str) or not corpus_hash:
        raise ValueError("corpus_hash must be a non-empty string")
    if not hasattr(encoder, "encode") or not hasattr(encoder, "spec"):
        raise ValueError(f"encoder must have .spec and .encode, got {type(encoder).__name__}")
    if encoder.spec.kind == "precomputed":  # an uploaded matrix answers for the whole corpus at once
        chunk_size = max(len(items), 1)
    kwargs: dict[str, object] = {"batch_size": batch_size}
    if max_length is not None:
        if not supports_max_length(encoder):
            raise ValueError(f"encoder {encoder.spec.id!r} does not accept max_length")
        kwargs["max_length"] = max_length

    if cache_dir is None:
        _fit_on_corpus(encoder, items)
        return _embed_in_memory(encoder, items, kwargs, chunk_size, progress)

    fields = cache_key_fields(encoder, corpus_hash, max_length)
    key = cache_key(fields)
    npy, sidecar = cache_paths(cache_dir, key)
    cached = _read_cached(npy, sidecar, len(items), fields)
    if cached is not None:
        if progress is not None:
            progress(len(items), len(items))
        return cached

    start = time.perf_counter()
    # the revision of fit-on-use encoders (tfidf-svd) changes when they fit; the key stays the one looked up
    _fit_on_corpus(encoder, items)
    dim = _embed_to_file(encoder, items, kwargs, chunk_size, progress, npy)
    seconds = time.perf_counter() - start
    meta = dict(fields)
    meta.update(
        key=key,
        n_rows=len(items),
        dim=dim,
        dtype="float32",
        seconds=round(seconds, 4),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        revision_after=encoder.spec.revision,
        chunk_size=chunk_size,
    )
    atomic.write_json(sidecar, meta)
    return np.load(npy, mmap_mode="r", allow_pickle=False)


def _fit_on_corpus(encoder: Encoder, items: list[str]) -> None:
    if getattr(encoder, "fitted", True) is False and callable(getattr(encoder, "fit", None)):
        encoder.fit(items)


def _encoded_chunks(
    encoder: Encoder,
    items: list[str],
    kwargs: dict[str, object],
    chunk_size: int,
    progress: ProgressFn | None,
) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, rows)`` for consecutive chunks of ``items``: rows float32 (m, d), checked, same d for all.

    An empty corpus yields one empty chunk (the encoder's (0, d)).
    """
    n = len(items)
    dim: int | None = None
    for start in range(0, max(n, 1), chunk_size):
        stop = min(start + chunk_size, n)

        def tick(done: int, total: int, _start: int = start) -> None:
            progress(_start + done, n)

        out = encoder.encode(items[start:stop], progress=tick if progress is not None else None, **kwargs)
        rows = _checked(out, start, stop, encoder)
        if dim is not None and rows.shape[1] != dim:
            raise RuntimeError(
                f"encoder {encoder.spec.id!r} returned dimension {rows.shape[1]} for texts {start}:{stop}, "
                f"{dim} before"
            )
        dim = rows.shape[1]
        yield start, rows


def _embed_in_memory(
    encoder: Encoder,
    items: list[str],
    kwargs: dict[str, object],
    chunk_size: int,
    progress: ProgressFn | None,
) -> np.ndarray:
    """float32 (N, d) in memory, filled chunk by chunk."""
    out: np.ndarray | None = None
    for start, rows in _encoded_chunks(encoder, items, kwargs, chunk_size, progress):
        if out is None:
            out = np.empty((len(items), rows.shape[1]), dtype=np.float32)
        out[start : start + rows.shape[0]] = rows
    assert out is not None
    return out


def _embed_to_file(
    encoder: Encoder,
    items: list[str],
    kwargs: dict[str, object],
    chunk_size: int,
    progress: ProgressFn | None,
    npy: Path,
) -> int:
    """Stream float32 (N, d) into ``npy`` (atomically, header written once d is known); returns d."""
    with contextlib.ExitStack() as stack:
        writer: atomic.NpyWriter | None = None
        for _, rows in _encoded_chunks(encoder, items, kwargs, chunk_size, progress):
            if writer is None:
                writer = stack.enter_context(
                    atomic.open_npy_writer(npy, (len(items), rows.shape[1]), np.float32)
                )
            writer.write(rows)
        assert writer is not None
        return int(writer.shape[1])


def _checked(emb: np.ndarray, start: int, stop: int, encoder: Encoder) -> np.ndarray:
    """``emb`` as C-contiguous float32 (stop - start, d) after checking shape and finiteness."""
    arr = np.asarray(emb)
    n = stop - start
    if arr.ndim != 2 or arr.shape[0] != n:
        raise RuntimeError(
            f"encoder {encoder.spec.id!r} returned shape {arr.shape} for the {n} texts {start}:{stop}"
        )
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise RuntimeError(f"encoder {encoder.spec.id!r} returned dtype {arr.dtype} for texts {start}:{stop}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        bad = start + int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise RuntimeError(
            f"encoder {encoder.spec.id!r} returned non-finite values for texts {start}:{stop} (first: text "
            f"{bad})"
        )
    return arr
