"""Token states of a corpus streamed to disk and read back text by text.

A store is a folder::

    tokens.npy    (total_tokens, d) or (total_tokens, K, d), float32 or float16: every token row of
                  every text, text after text (K layers per token when several layers were asked for)
    offsets.npy   (N + 1,) int64: text i owns rows offsets[i]:offsets[i + 1]
    meta.json     model id and revision, layers, include_special, max_length, dtype, n_texts,
                  total_tokens, dim, n_layers, texts_hash

``tokens.npy`` is an ordinary ``.npy`` file: its header is reserved at a fixed size while the rows are
appended and rewritten with the final row count at the end, so it opens with
``np.load(mmap_mode="r")``. The folder is assembled under a temporary name and renamed into place,
so a half-written store is never visible.

float16 storage halves the file. Values are rounded to 11 significant bits: relative error at most
2^-11 (4.9e-4) for magnitudes above 6.1e-5, absolute error at most 3e-8 below; magnitudes above 65504
are refused when writing. Distances computed from float16 states move accordingly (``pair_distances``
on a small random BERT: d_mu by 3e-5, d_sigma and SOCM by 1e-4 at most).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from flare_core.checks import check_bool, check_callable, check_choice, check_int
from flare_core.encoders.base import ProgressFn, check_batch_size, check_max_length, check_texts
from flare_core.encoders.corpus_fitted import texts_hash
from flare_core.store import atomic

FORMAT = "flare-token-states"
VERSION = 1
TOKENS_FILE = "tokens.npy"
OFFSETS_FILE = "offsets.npy"
META_FILE = "meta.json"
DTYPES = ("float32", "float16")

_META_INTS = ("n_texts", "total_tokens", "dim")


class TokenStates(Sequence[np.ndarray]):
    """The token states of N texts in a store written by :func:`write_token_states`.

    ``states[i]`` is text ``i``'s float32 array: (n_i, d) for one layer, (K, n_i, d) for several,
    C-ordered and writable, read from the memory-mapped file into a fresh array (one text's worth of
    memory; ``rows`` gives zero-copy read-only access to everything). Negative indices count from the
    end; slices give lists. It plugs into anything that takes a sequence of per-text arrays, such as
    :func:`flare_core.analyses.collapse.pair_distances`.

    Attributes:
        directory: the store folder.
        meta: the content of ``meta.json``.
        offsets: int64 (N + 1,) row offsets.
        rows: the read-only memmap of ``tokens.npy``, (total_tokens, d) or (total_tokens, K, d).
    """

    def __init__(self, directory: Path, meta: dict[str, Any], offsets: np.ndarray, rows: np.ndarray) -> None:
        self.directory = directory
        self.meta = meta
        self.offsets = offsets
        self.rows = rows

    @classmethod
    def open(cls, directory: str | Path) -> TokenStates:
        """Open a store, checking ``meta.json``, the offsets and the shape of ``tokens.npy``.

        Raises ``FileNotFoundError`` when ``directory`` is not a folder and :class:`DamagedTokenStore` (a
        ``ValueError`` whose ``path`` is the damaged file) when the store is incomplete or inconsistent.
        Token values are not read (they were checked when written).
        """
        folder = Path(directory)
        if not folder.is_dir():
            raise FileNotFoundError(f"no token store at {folder}")
        return cls(folder, *_read_store(folder))

    # ------------------------------------------------------------------ sequence

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @overload
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> list[np.ndarray]: ...

    def __getitem__(self, index: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(index, slice):
            return [self._text(i) for i in range(*index.indices(len(self)))]
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"token store indices must be integers or slices, got {type(index).__name__}")
        n = len(self)
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"text index {index} is out of range for {n} texts")
        return self._text(i % n)

    def _text(self, i: int) -> np.ndarray:
        block = self.rows[self.offsets[i] : self.offsets[i + 1]]  # (n_i, d) or (n_i, K, d), mapped
        if block.ndim == 3:
            block = block.transpose(1, 0, 2)
        return np.array(block, dtype=np.float32, order="C")

    # ------------------------------------------------------------------ properties

    @property
    def lengths(self) -> np.ndarray:
        """int64 (N,): tokens per text."""
        return np.diff(self.offsets)

    @property
    def dim(self) -> int:
        """d, the hidden size."""
        return int(self.meta["dim"])

    @property
    def n_layers(self) -> int | None:
        """K, the layers stored per token, or ``None`` for a single-layer (``layers="last"``) store."""
        return None if self.rows.ndim == 2 else int(self.rows.shape[1])

    @property
    def total_tokens(self) -> int:
        return int(self.rows.shape[0])

    @property
    def dtype(self) -> np.dtype:
        """The storage dtype (arrays are always returned as float32)."""
        return self.rows.dtype

    @property
    def nbytes(self) -> int:
        """Bytes of token rows on disk."""
        return int(self.rows.nbytes)

    def __repr__(self) -> str:
        return (
            f"TokenStates({str(self.directory)!r}, texts={len(self)}, tokens={self.total_tokens}, "
            f"dim={self.dim}, layers={self.meta.get('layers')!r}, dtype={self.dtype})"
        )


class DamagedTokenStore(ValueError):
    """A token store that cannot be used: ``path`` is the damaged (or missing) file of the store, ``why``
    what is wrong with it, and the message names it and says what to do."""

    def __init__(self, message: str, path: Path, why: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.why = why


def _corrupt(folder: Path, name: str, why: str) -> DamagedTokenStore:
    return DamagedTokenStore(
        f"corrupt token store {folder}: {name} {why}. Token states are computed again from the texts: "
        f"delete the folder {folder} and write them again",
        folder / name,
        why,
    )


def _read_store(folder: Path) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """(meta, offsets, rows memmap) of a store after checking that they agree."""
    for name in (META_FILE, OFFSETS_FILE, TOKENS_FILE):
        if not (folder / name).is_file():
            raise _corrupt(folder, name, "is missing")
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise _corrupt(folder, META_FILE, f"is not readable JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _corrupt(folder, META_FILE, f"does not describe a {FORMAT} store")
    if meta.get("version") != VERSION:
        raise _corrupt(folder, META_FILE, f"has format version {meta.get('version')!r}, not {VERSION}")
    for key in _META_INTS:
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _corrupt(folder, META_FILE, f"has {key!r} {value!r}, expected a non-negative integer")
    if meta.get("dtype") not in DTYPES:
        raise _corrupt(folder, META_FILE, f"has dtype {meta.get('dtype')!r}, not one of {DTYPES}")
    n_layers = meta.get("n_layers")
    if n_layers is not None and (isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1):
        raise _corrupt(folder, META_FILE, f"has n_layers {n_layers!r}, expected None or a positive integer")
    try:
        offsets = np.load(folder / OFFSETS_FILE, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise _corrupt(folder, OFFSETS_FILE, f"cannot be read ({exc})") from None
    try:
        rows = np.load(folder / TOKENS_FILE, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise _corrupt(folder, TOKENS_FILE, f"cannot be read ({exc})") from None
    n, total, dim = meta["n_texts"], meta["total_tokens"], meta["dim"]
    if offsets.dtype != np.int64 or offsets.shape != (n + 1,):
        raise _corrupt(
            folder, OFFSETS_FILE, f"holds {offsets.dtype} {offsets.shape}, expected int64 ({n + 1},)"
        )
    if offsets[0] != 0 or offsets[-1] != total:
        raise _corrupt(
            folder, OFFSETS_FILE, f"runs from {offsets[0]} to {offsets[-1]}, expected 0 to {total}"
        )
    if n and bool((np.diff(offsets) < 0).any()):
        raise _corrupt(folder, OFFSETS_FILE, "has offsets that decrease")
    expected = (total, dim) if n_layers is None else (total, n_layers, dim)
    if rows.shape != expected or rows.dtype != np.dtype(meta["dtype"]):
        raise _corrupt(
            folder, TOKENS_FILE, f"is {rows.dtype} {rows.shape}, expected {meta['dtype']} {expected}"
        )
    if not rows.flags.c_contiguous:
        raise _corrupt(folder, TOKENS_FILE, "is not C-ordered")
    return meta, offsets, rows


def damaged_stores(folder: str | Path) -> list[DamagedTokenStore]:
    """Why each complete token store under ``folder`` (any folder holding a ``meta.json``) cannot be
    opened; empty when every store opens. Stores still being written (inside a ``.tmp-*`` folder) are
    left out."""
    root = Path(folder)
    found: list[DamagedTokenStore] = []
    if not root.is_dir():
        return found
    for meta in sorted(root.rglob(META_FILE)):
        if any(part.startswith(".tmp-") for part in meta.relative_to(root).parts):
            continue
        try:
            _read_store(meta.parent)
        except DamagedTokenStore as exc:
            found.append(exc)
    return found


def _check_layers(layers: str | Sequence[int]) -> str | list[int]:
    if isinstance(layers, str):
        if layers not in ("last", "all"):
            raise ValueError(f"layers must be 'last', 'all' or a list of layer indices, got {layers!r}")
        return layers
    picks = list(layers)
    if not picks:
        raise ValueError("layers is an empty list")
    for layer in picks:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise ValueError(f"layer indices must be integers, got {layer!r}")
    return [int(layer) for layer in picks]


def write_token_states(
    encoder: Any,
    texts: Sequence[str],
    directory: str | Path,
    *,
    layers: str | Sequence[int] = "last",
    include_special: bool = True,
    batch_size: int = 16,
    chunk_size: int = 512,
    max_length: int | None = None,
    dtype: str = "float32",
    progress: ProgressFn | None = None,
    overwrite: bool = False,
) -> TokenStates:
    """Compute the token states of ``texts`` ``chunk_size`` texts at a time and stream them to a store.

    Args:
        encoder: anything with ``spec`` and ``token_states(texts, *, layers, include_special, batch_size,
            max_length)`` returning one float array per text, (n_i, d) or (K, n_i, d)
            (:class:`~flare_core.encoders.TransformerEncoder`); with ``progress`` it also gets
            ``progress=``, called as ``progress(done, len(texts))`` after each batch.
        texts: N >= 1 texts.
        directory: the store folder to create (it must not exist or be empty unless ``overwrite``).
        layers, include_special, batch_size, max_length: passed to ``encoder.token_states``.
        chunk_size: texts per ``token_states`` call; memory holds one chunk's states at a time.
        dtype: ``"float32"`` or ``"float16"`` storage (half the disk; see the module docstring).
        progress: ``progress(done_texts, N)`` after each batch and each chunk.
        overwrite: replace an existing store at ``directory``.

    Returns:
        The written store, opened (:meth:`TokenStates.open`).
    """
    items = check_texts(texts)
    if not items:
        raise ValueError("texts is empty: a token store needs at least one text")
    if not callable(getattr(encoder, "token_states", None)) or not hasattr(encoder, "spec"):
        raise ValueError(f"encoder must have .spec and .token_states, got {type(encoder).__name__}")
    picks = _check_layers(layers)
    batch_size = check_batch_size(batch_size)
    max_length = check_max_length(max_length)
    check_int(chunk_size, "chunk_size", min_value=1)
    check_choice(dtype, "dtype", DTYPES)
    check_bool(include_special, "include_special")
    check_callable(progress, "progress")

    if progress is not None:  # batches and chunks both report: each count once
        progress = _once_each(progress)
    compute = _chunk_states(encoder, picks, include_special, batch_size, max_length, progress, len(items))
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model_id": encoder.spec.id,
        "revision": encoder.spec.revision,
        "layers": picks,
        "include_special": include_special,
        "max_length": max_length,
        "dtype": dtype,
        "n_texts": len(items),
        "texts_hash": texts_hash(items),
    }
    start = time.perf_counter()
    with atomic.atomic_dir(directory, overwrite=overwrite) as tmp:
        n_layers = len(picks) if isinstance(picks, list) else None
        shape, offsets = _stream_states(
            compute, items, int(chunk_size), np.dtype(dtype), tmp, progress, picks != "last", n_layers
        )
        atomic.write_npy(tmp / OFFSETS_FILE, offsets)
        meta.update(
            total_tokens=int(shape[0]),
            dim=int(shape[-1]),
            n_layers=int(shape[1]) if len(shape) == 3 else None,
            seconds=round(time.perf_counter() - start, 4),
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        atomic.write_json(tmp / META_FILE, meta)
    return TokenStates.open(directory)


def _chunk_states(
    encoder: Any,
    picks: str | list[int],
    include_special: bool,
    batch_size: int,
    max_length: int | None,
    progress: ProgressFn | None,
    n_texts: int,
) -> Callable[[list[str], int], list[np.ndarray]]:
    """``compute(chunk, start)``: the token states of the texts ``start:start + len(chunk)``, reporting
    each batch to ``progress`` as a count over all ``n_texts``."""

    def compute(chunk: list[str], start: int) -> list[np.ndarray]:
        options: dict[str, Any] = {}
        if progress is not None:
            options["progress"] = lambda done, _total: progress(start + done, n_texts)
        return encoder.token_states(
            chunk,
            layers=picks,
            include_special=include_special,
            batch_size=batch_size,
            max_length=max_length,
            **options,
        )

    return compute


def _once_each(progress: ProgressFn) -> ProgressFn:
    """``progress``, called only when the count of texts done has grown."""
    last = [-1]

    def forward(done: int, total: int) -> None:
        if done > last[0]:
            last[0] = done
            progress(done, total)

    return forward


def _stream_states(
    compute: Callable[[list[str], int], list[np.ndarray]],
    items: list[str],
    chunk_size: int,
    dtype: np.dtype,
    folder: Path,
    progress: ProgressFn | None,
    layered: bool,
    n_layers: int | None,
) -> tuple[tuple[int, ...], np.ndarray]:
    """Write every text's rows to ``folder/tokens.npy``; returns (its shape, int64 (N + 1,) offsets).

    ``layered``: each text's states are (K, n_i, d) (``K == n_layers`` when given), else (n_i, d).
    """
    n = len(items)
    offsets = np.zeros(n + 1, dtype=np.int64)
    with contextlib.ExitStack() as stack:
        writer: atomic.NpyWriter | None = None
        for start in range(0, n, chunk_size):
            chunk = items[start : start + chunk_size]
            states = compute(chunk, start)
            if not isinstance(states, Sequence) or len(states) != len(chunk):
                got = len(states) if isinstance(states, Sequence) else type(states).__name__
                raise RuntimeError(
                    f"token_states returned {got} arrays for the {len(chunk)} texts "
                    f"{start}:{start + len(chunk)}"
                )
            for j, state in enumerate(states):
                i = start + j
                rows = _token_rows(
                    state, i, layered, n_layers, writer.row_shape if writer is not None else None
                )
                if dtype != np.float32:
                    with np.errstate(over="ignore"):
                        rows = rows.astype(dtype)
                    if not np.isfinite(rows).all():
                        raise ValueError(f"token states of text {i} exceed the {dtype} range; store float32")
                if writer is None:
                    writer = stack.enter_context(
                        atomic.open_npy_writer(folder / TOKENS_FILE, (None, *rows.shape[1:]), dtype)
                    )
                writer.write(rows)
                offsets[i + 1] = offsets[i] + rows.shape[0]
            del states
            if progress is not None:
                progress(start + len(chunk), n)
        assert writer is not None
        shape = (writer.rows, *writer.row_shape)
    return shape, offsets


def _token_rows(
    state: Any, i: int, layered: bool, n_layers: int | None, row_shape: tuple[int, ...] | None
) -> np.ndarray:
    """Text ``i``'s states as float32 rows (n_i, d) or (n_i, K, d), checked against earlier texts."""
    arr = np.asarray(state)
    want = "(K, n, d)" if layered else "(n, d)"
    if arr.ndim != (3 if layered else 2) or not np.issubdtype(arr.dtype, np.floating):
        raise RuntimeError(
            f"token_states of text {i}: expected a float {want} array, got {arr.dtype} {arr.shape}"
        )
    if layered and n_layers is not None and arr.shape[0] != n_layers:
        raise RuntimeError(f"token_states of text {i} has {arr.shape[0]} layers, {n_layers} were asked for")
    rows = np.ascontiguousarray(arr.transpose(1, 0, 2) if layered else arr, dtype=np.float32)
    if row_shape is not None and rows.shape[1:] != row_shape:
        raise RuntimeError(
            f"token_states of text {i} has rows of shape {rows.shape[1:]}, earlier texts {row_shape}"
        )
    if not np.isfinite(rows).all():
        raise RuntimeError(f"token_states of text {i} contains non-finite values")
    return rows
