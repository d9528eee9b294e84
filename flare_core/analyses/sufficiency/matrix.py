"""The pairwise information-sufficiency matrix IS(U_a -> U_b) over a pool of embedders.

One seeded train/validation split is shared by every pair; each embedding is standardised per dimension
with training-split statistics; the marginal of each target is trained once and shared by all its
sources. The units (:mod:`flare_core.analyses.sufficiency.units`: a target's marginal, then a pair's
conditional) are pure functions of the standardised arrays, the config and their seeds, and run on an
executor through :func:`flare_core.compute.scheduler.run_units` (in this process by default, or in
worker processes, or as Ray tasks on a cluster). With ``store_dir`` every finished unit is written
atomically as it comes in (:mod:`flare_core.analyses.sufficiency.unit_store`), so a later call with the
same store skips it and returns the same numbers as an uninterrupted run, whichever executor ran each unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flare_core.analyses.sufficiency._config import DictConfig
from flare_core.analyses.sufficiency._standardize import split_indices
from flare_core.analyses.sufficiency._whiten import fit_whitening
from flare_core.analyses.sufficiency.matrix_run import MatrixInputs, MatrixRun
from flare_core.analyses.sufficiency.registry import get_estimator
from flare_core.analyses.sufficiency.result import _FORMAT, SufficiencyResult
from flare_core.analyses.sufficiency.unit_store import UnitStore, fingerprint, row_chunks
from flare_core.checks import check_bool, check_callable, check_choice, check_int, check_probability
from flare_core.compute import EXECUTORS, Executor, LocalExecutor, Resources, get_executor
from flare_core.compute.scheduler import run_units
from flare_core.device import pick_device

_ON_ERROR = ("raise", "continue")


def sufficiency_matrix(
    embeddings: Mapping[str, np.ndarray],
    *,
    estimator: str = "flow",
    config: DictConfig | None = None,
    sources: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    seed: int = 0,
    val_fraction: float = 0.1,
    device: str | None = None,
    store_dir: str | Path | None = None,
    progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    executor: Executor | str | None = None,
    on_error: str | None = None,
    stream: bool | None = None,
    max_dims: int | None = None,
) -> SufficiencyResult:
    """Estimate IS(a -> b) for every ordered pair a != b with a in ``sources`` and b in ``targets``.

    ``embeddings[name]`` is an (n, d_name) array; all share the same n rows (the same texts, same order).
    ``estimator``: a name of :data:`~flare_core.analyses.sufficiency.registry.ESTIMATORS`, "flow" (FLARE,
    :class:`FlowConfig`) or "gmm" (EMIR/KNIFE, :class:`GMMConfig`); ``config`` is of its ``config_type``.
    Targets default to every name, so reference models can be targets without being ranked (leave them
    out of ``sources``). Seeds: the split from ``seed``; the marginal of target b from (seed, b); the
    conditional of (a, b) from (seed, a, b) (SHA-256, independent of the order of the work).

    Work units run on ``executor`` (an :class:`~flare_core.compute.Executor`, a name from
    ``flare_core.compute.EXECUTORS``, or None for the in-process local executor): the marginal of
    each target first, then its conditionals once it is done. Each unit is a pure function of the
    standardised arrays, the config and its seeds, so every executor gives the same numbers (for the
    same device and torch thread count). With a remote executor ``device`` is resolved inside each
    task (None: that worker's best device; "cuda" makes each task ask for a GPU).

    ``progress`` receives ``{"stage", "source", "target", "done", "total", "resumed"}`` after each
    unit (plus ``"error"`` when the unit failed, and ``"worker"`` / ``"seconds"`` when an executor ran
    it); ``should_stop()`` is checked before each unit that needs training (and while waiting on a
    remote executor) and raises :class:`~flare_core.errors.Cancelled`. With ``store_dir`` finished units are
    written as they come in and skipped on the next call. ``on_error``: "raise" (the default with the local
    executor) re-raises a unit's exception; "continue" (the default with a remote executor) records it in
    ``result.failed`` (a failed marginal fails its target's pairs), leaves NaN in the matrix, stores nothing
    for it, and goes on.

    ``max_dims``: each embedding is PCA-whitened on the training split to at most this many
    dimensions before any density is fitted (:mod:`flare_core.analyses.sufficiency._whiten`); the
    result's ``dims`` are then the whitened widths, and IS per dimension divides by them. None keeps
    the standardised embedding at its own width.

    ``stream``: True trains every unit from mini-batches gathered and standardised on the fly
    (:class:`~flare_core.analyses.sufficiency._rows.StandardizedRows`), so no standardised copy of an
    embedding is held in memory and a memory-mapped ``.npy`` (``np.load(path, mmap_mode="r")``) reaches remote
    tasks as its path; False standardises each embedding in memory once; None (default) streams the
    memory-mapped embeddings larger than 256 MiB. Both paths give bit-identical numbers.
    """
    names, arrays = _validate_embeddings(embeddings)
    sources = _validate_subset("sources", sources, names)
    targets = _validate_subset("targets", targets, names)
    cfg = _resolve_config(estimator, config)
    seed, max_dims = _check_options(seed, val_fraction, progress, should_stop, stream, on_error, max_dims)
    task_device, resources = _placement(executor, device)
    n = next(iter(arrays.values())).shape[0]
    train_idx, val_idx = _split(estimator, cfg, n, float(val_fraction), seed)
    reductions, raw_dims, dims = _whitenings(arrays, train_idx, max_dims)
    config_dict = {"estimator": estimator, **cfg.to_dict()}
    store = _open_store(store_dir, arrays, dims, config_dict, seed, float(val_fraction), max_dims)
    ex, owned = _resolve_executor(executor)
    inputs = MatrixInputs(
        estimator, arrays, dims, train_idx, val_idx, cfg, seed, task_device, resources, stream, reductions
    )
    plan = [(t, [s for s in sources if s != t]) for t in targets]
    plan = [(t, srcs) for t, srcs in plan if srcs]
    matrix = MatrixRun(
        inputs, plan, store, ex, progress, should_stop, on_error or ("continue" if ex.remote else "raise")
    )
    try:
        run_units(ex, matrix.units(), matrix, poll=0.5 if should_stop is not None else None)
    finally:
        if owned:
            ex.close()
    return matrix.result(sources, targets, config_dict, estimator, max_dims=max_dims, raw_dims=raw_dims)


def _check_options(
    seed: int,
    val_fraction: float,
    progress: Callable[[dict], None] | None,
    should_stop: Callable[[], bool] | None,
    stream: bool | None,
    on_error: str | None,
    max_dims: int | None,
) -> tuple[int, int | None]:
    """Check the scalar options of :func:`sufficiency_matrix`; returns the checked seed and max_dims."""
    check_probability(val_fraction, "val_fraction", include_min=False, include_max=False)
    check_callable(progress, "progress")
    check_callable(should_stop, "should_stop")
    check_bool(stream, "stream", allow_none=True)
    check_choice(on_error, "on_error", (None, *_ON_ERROR))
    return check_int(seed, "seed"), check_int(max_dims, "max_dims", min_value=1, allow_none=True)


def _whitenings(
    arrays: Mapping[str, np.ndarray], train_idx: np.ndarray, max_dims: int | None
) -> tuple[dict[str, tuple], dict[str, int], dict[str, int]]:
    """Each embedding's whitening fitted on the training rows, its raw width and its fitted width."""
    reductions = {name: fit_whitening(x, train_idx, max_dims) for name, x in arrays.items()}
    raw_dims = {name: int(x.shape[1]) for name, x in arrays.items()}
    dims = {name: raw_dims[name] if r[2] is None else int(r[2].shape[1]) for name, r in reductions.items()}
    return reductions, raw_dims, dims


def _open_store(
    store_dir: str | Path | None,
    arrays: dict[str, np.ndarray],
    dims: dict[str, int],
    config: dict[str, Any],
    seed: int,
    val_fraction: float,
    max_dims: int | None,
) -> UnitStore:
    """The unit store of ``store_dir`` (none when None), checked to hold this same matrix if it exists."""
    names = list(arrays)
    store = UnitStore(Path(store_dir) if store_dir is not None else None, names)
    manifest = {
        "format": _FORMAT,
        "names": names,
        "dims": dims,
        "config": config,
        "seed": seed,
        "val_fraction": val_fraction,
        "n_rows": next(iter(arrays.values())).shape[0],
        "fingerprints": {name: fingerprint(x) for name, x in arrays.items()},
    }
    if max_dims is not None:  # stores written before whitening have no such key
        manifest["max_dims"] = max_dims
    store.check_manifest(manifest)
    return store


def _placement(
    executor: Executor | str | None, device: str | None
) -> tuple[str | torch.device | None, Resources]:
    """Where tasks compute: the device they are given and the resources they ask for.

    With a remote executor ``device`` is resolved inside each task (None: that worker's best device);
    in this process it is resolved here once.
    """
    if executor is not None and not isinstance(executor, str | Executor):
        raise ValueError(f"executor must be an Executor, a name {list(EXECUTORS)} or None, got {executor!r}")
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}: choose from {list(EXECUTORS)}")
    remote = isinstance(executor, Executor) and executor.remote or executor == "ray"
    if remote:
        if device is not None:
            try:
                torch.device(device)
            except (RuntimeError, TypeError) as exc:
                raise ValueError(f"device {device!r} is not a torch device") from exc
        task_device: str | torch.device | None = device
        wants_gpu = device is not None and torch.device(device).type == "cuda"
    else:
        task_device = pick_device(device)
        wants_gpu = task_device.type == "cuda"
    return task_device, Resources(num_cpus=1.0, num_gpus=1.0 if wants_gpu else 0.0)


def _split(
    estimator: str, cfg: DictConfig, n: int, val_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(train_idx, val_idx)``: the seeded split, or every row for both with EMIR's train-set evaluation."""
    if get_estimator(estimator).evaluates_on_training_rows(cfg):
        if n < 2:
            raise ValueError(f"need at least 2 rows, got {n}")
        every = np.arange(n, dtype=np.int64)
        return every, every
    train_idx, val_idx = split_indices(n, val_fraction, seed)
    if len(train_idx) < 2 or len(val_idx) < 2:
        raise ValueError(
            f"{n} rows with val_fraction={val_fraction} give {len(train_idx)} training and "
            f"{len(val_idx)} validation rows; need at least 2 of each"
        )
    return train_idx, val_idx


def _validate_embeddings(embeddings: Mapping[str, np.ndarray]) -> tuple[list[str], dict[str, np.ndarray]]:
    if not isinstance(embeddings, Mapping):
        raise ValueError(
            f"embeddings must be a mapping name -> (n, d) array, got {type(embeddings).__name__}"
        )
    if len(embeddings) < 2:
        raise ValueError(f"need at least 2 embeddings to form pairs, got {len(embeddings)}")
    names = list(embeddings)
    arrays: dict[str, np.ndarray] = {}
    n_rows = None
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"embedding names must be non-empty strings, got {name!r}")
        arr = np.asanyarray(embeddings[name])
        if arr.ndim != 2 or arr.shape[1] < 1:
            raise ValueError(
                f"embedding {name!r} must be a 2-D array (n, d) with d >= 1, got shape {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(f"embedding {name!r} must be real-valued, got dtype {arr.dtype}")
        bad = sum(int((~np.isfinite(block)).sum()) for block in row_chunks(arr))
        if bad:
            raise ValueError(f"embedding {name!r} has {bad} non-finite entries")
        if n_rows is None:
            n_rows = arr.shape[0]
        elif arr.shape[0] != n_rows:
            raise ValueError(
                f"all embeddings must have the same rows: {names[0]!r} has {n_rows}, {name!r} has "
                f"{arr.shape[0]}"
            )
        arrays[name] = arr
    return names, arrays


def _validate_subset(kind: str, chosen: Sequence[str] | None, names: list[str]) -> list[str]:
    if chosen is None:
        return list(names)
    if isinstance(chosen, str):
        raise ValueError(f"{kind} must be a sequence of names, not a single string {chosen!r}")
    chosen = list(chosen)
    if not chosen:
        raise ValueError(f"{kind} must not be empty")
    unknown = [c for c in chosen if c not in names]
    if unknown:
        raise ValueError(f"{kind} has names not in embeddings: {unknown}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"{kind} has duplicate names: {chosen}")
    return chosen


def _resolve_config(estimator: str, config: DictConfig | None) -> DictConfig:
    est = get_estimator(estimator)
    if config is None:
        return est.config_type()
    if not isinstance(config, est.config_type):
        raise ValueError(
            f"estimator {estimator!r} needs a {est.config_type.__name__}, got {type(config).__name__}"
        )
    return config


def _resolve_executor(executor: Executor | str | None) -> tuple[Executor, bool]:
    """(executor, owned): an executor built here from a name is closed when the matrix is done."""
    if executor is None:
        return LocalExecutor(), True
    if isinstance(executor, str):
        return get_executor(executor), True
    if isinstance(executor, Executor):
        return executor, False
    raise ValueError(f"executor must be an Executor, a name {list(EXECUTORS)} or None, got {executor!r}")
