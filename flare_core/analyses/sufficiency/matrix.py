"""The pairwise information-sufficiency matrix IS(U_a -> U_b) over a pool of embedders.

One seeded train/validation split is shared by every pair; each embedding is standardised per dimension
with training-split statistics; the marginal of each target is trained once and shared by all its
sources. The units (a target's marginal, then a pair's conditional) are pure functions of the
standardised arrays, the config and their seeds, and run on an executor (:mod:`flare_core.compute`:
in this process by default, or as Ray tasks on a cluster). With ``store_dir`` every finished unit is
written atomically as it comes in, so a later call with the same store skips it and returns the same
numbers as an uninterrupted run, whichever executor ran each unit.

Store layout (indices are positions in the manifest's ``names``, so any model name is safe)::

    manifest.json                 names, dims, estimator, config, seed, split, data fingerprints
    marginals/t{j}.json|.npy|.pt  record, validation log p (n_val,), flow state_dict (flow only)
    pairs/s{i}_t{j}.json|.npy     record, validation log p(v|u) (n_val,)
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.analyses.sufficiency import flows, gmm
from flare_core.analyses.sufficiency._rows import StandardizedRows
from flare_core.analyses.sufficiency._standardize import (
    _derive_seed,
    _fit_standardizer,
    _split_indices,
    _standardize,
)
from flare_core.analyses.sufficiency.flows import FlowConfig
from flare_core.analyses.sufficiency.gmm import GMMConfig
from flare_core.checks import check_bool, check_callable, check_choice, check_int, check_probability
from flare_core.compute import EXECUTORS, Executor, LocalExecutor, Outcome, Resources, get_executor
from flare_core.device import pick_device
from flare_core.errors import Cancelled
from flare_core.store import atomic

_ESTIMATORS = ("flow", "gmm")
_FORMAT = 1
RECORD_COLUMNS = [
    "source",
    "target",
    "d_source",
    "d_target",
    "nll_marg_train",
    "nll_marg_val",
    "nll_cond_train",
    "nll_cond_val",
    "is_nats",
    "is_per_dim",
    "delta_emp_marg",
    "delta_emp_cond",
    "epochs",
    "seconds",
]
MARGINAL_COLUMNS = ["target", "d_target", "nll_train", "nll_val", "epochs", "seconds"]
FAILED_COLUMNS = ["stage", "source", "target", "error"]
_ON_ERROR = ("raise", "continue")
# FlowConfig fields added after stores were first written, with the value those stores were trained with
_ADDED_FLOW_DEFAULTS = {"autocast": False, "batch_conditionals": 1}


@dataclass
class SufficiencyResult:
    """Everything a sufficiency run produced.

    - ``names``: targets (columns of ``is_matrix``), ``sources``: rows; ``dims[name]``: embedding width.
    - ``is_matrix``: DataFrame (sources x targets) of IS in nats on the validation split; NaN on the
      diagonal and where not computed.
    - ``records``: one row per computed pair, columns :data:`RECORD_COLUMNS`.
    - ``marginals``: one row per trained target marginal, columns :data:`MARGINAL_COLUMNS`.
    - ``val_logp_marg[target]``: (n_val,) per-sample validation log p(v) in nats;
      ``val_logp_cond[(source, target)]``: (n_val,) log p(v|u). Row i refers to ``val_idx[i]``.
    - ``train_idx`` (n_train,), ``val_idx`` (n_val,): row indices of the split (EMIR's train-set
      evaluation uses every row for both).
    - ``failed``: one row per unit that raised (``on_error="continue"``), columns
      :data:`FAILED_COLUMNS` (``stage`` "marginal" or "conditional", ``source`` None for marginals,
      ``error`` "ExceptionType: message"); empty when everything finished.
    """

    names: list[str]
    sources: list[str]
    dims: dict[str, int]
    is_matrix: pd.DataFrame
    records: pd.DataFrame
    val_logp_marg: dict[str, np.ndarray]
    val_logp_cond: dict[tuple[str, str], np.ndarray]
    config: dict[str, Any]
    seed: int
    train_idx: np.ndarray
    val_idx: np.ndarray
    estimator: str = "flow"
    marginals: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MARGINAL_COLUMNS))
    failed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FAILED_COLUMNS))

    @property
    def n_val(self) -> int:
        return int(len(self.val_idx))

    @property
    def failed_pairs(self) -> list[tuple[str, str]]:
        """(source, target) of every pair without an estimate because a unit failed."""
        rows = self.failed[self.failed["stage"] == "conditional"]
        return [(str(s), str(t)) for s, t in zip(rows["source"], rows["target"], strict=True)]

    def save(self, directory: str | Path) -> Path:
        """Write the result under ``directory`` (JSON + Parquet + .npy, atomic per file, no pickles)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        marg_names = list(self.val_logp_marg)
        pairs = list(self.val_logp_cond)
        meta = {
            "format": _FORMAT,
            "names": self.names,
            "sources": self.sources,
            "dims": self.dims,
            "config": self.config,
            "seed": self.seed,
            "estimator": self.estimator,
            "marginal_names": marg_names,
            "pairs": [list(p) for p in pairs],
        }
        n_val = self.n_val
        marg = np.stack([self.val_logp_marg[k] for k in marg_names]) if marg_names else np.zeros((0, n_val))
        cond = np.stack([self.val_logp_cond[p] for p in pairs]) if pairs else np.zeros((0, n_val))
        matrix = self.is_matrix.reindex(index=self.sources, columns=self.names).to_numpy(dtype=np.float64)
        atomic.write_npy(directory / "is_matrix.npy", matrix)
        atomic.write_npy(directory / "val_logp_marg.npy", marg.astype(np.float64))
        atomic.write_npy(directory / "val_logp_cond.npy", cond.astype(np.float64))
        atomic.write_npy(directory / "train_idx.npy", np.asarray(self.train_idx, dtype=np.int64))
        atomic.write_npy(directory / "val_idx.npy", np.asarray(self.val_idx, dtype=np.int64))
        atomic.write_parquet(directory / "records.parquet", self.records.reset_index(drop=True))
        atomic.write_parquet(directory / "marginals.parquet", self.marginals.reset_index(drop=True))
        failed = self.failed.reindex(columns=FAILED_COLUMNS).astype(object).reset_index(drop=True)
        atomic.write_parquet(directory / "failed.parquet", failed)
        atomic.write_json(directory / "result.json", meta)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> SufficiencyResult:
        """Read a result written by :meth:`save`."""
        directory = Path(directory)
        meta_path = directory / "result.json"
        if not meta_path.is_file():
            raise ValueError(f"no sufficiency result in {directory} (result.json is missing)")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"unsupported result format {meta.get('format')!r} in {directory}")
        marg = atomic.read_npy(directory / "val_logp_marg.npy")
        cond = atomic.read_npy(directory / "val_logp_cond.npy")
        matrix = atomic.read_npy(directory / "is_matrix.npy")
        pairs = [tuple(p) for p in meta["pairs"]]
        return cls(
            names=list(meta["names"]),
            sources=list(meta["sources"]),
            dims={k: int(v) for k, v in meta["dims"].items()},
            is_matrix=pd.DataFrame(matrix, index=list(meta["sources"]), columns=list(meta["names"])),
            records=pd.read_parquet(directory / "records.parquet"),
            val_logp_marg={k: marg[i] for i, k in enumerate(meta["marginal_names"])},
            val_logp_cond={p: cond[i] for i, p in enumerate(pairs)},
            config=meta["config"],
            seed=int(meta["seed"]),
            train_idx=atomic.read_npy(directory / "train_idx.npy"),
            val_idx=atomic.read_npy(directory / "val_idx.npy"),
            estimator=meta["estimator"],
            marginals=pd.read_parquet(directory / "marginals.parquet"),
            failed=(
                pd.read_parquet(directory / "failed.parquet")
                if (directory / "failed.parquet").is_file()
                else pd.DataFrame(columns=FAILED_COLUMNS)
            ),
        )


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
        bad = sum(int((~np.isfinite(block)).sum()) for block in _row_chunks(arr))
        if bad:
            raise ValueError(f"embedding {name!r} has {bad} non-finite entries")
        if n_rows is None:
            n_rows = arr.shape[0]
        elif arr.shape[0] != n_rows:
            raise ValueError(
                f"all embeddings must have the same rows: {names[0]!r} has {n_rows}, {name!r} has {arr.shape[0]}"
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


def _resolve_config(estimator: str, config: FlowConfig | GMMConfig | None) -> FlowConfig | GMMConfig:
    if estimator not in _ESTIMATORS:
        raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
    expected = FlowConfig if estimator == "flow" else GMMConfig
    if config is None:
        return expected()
    if not isinstance(config, expected):
        raise ValueError(f"estimator {estimator!r} needs a {expected.__name__}, got {type(config).__name__}")
    return config


_CHUNK_ROWS = 8192


def _row_chunks(arr: np.ndarray) -> Sequence[np.ndarray]:
    """Consecutive row blocks of ``arr`` (n, d), so a memory-mapped array is read a block at a time."""
    return [arr[start : start + _CHUNK_ROWS] for start in range(0, max(len(arr), 1), _CHUNK_ROWS)]


def _fingerprint(arr: np.ndarray) -> str:
    """sha256 of the shape and the float64 C-order bytes of ``arr`` (hashed a row block at a time)."""
    h = hashlib.sha256()
    h.update(str(arr.shape).encode())
    for block in _row_chunks(arr):
        h.update(np.ascontiguousarray(block, dtype=np.float64).tobytes())
    return h.hexdigest()


class _Store:
    """Per-unit persistence under ``root`` (or nothing when ``root`` is None)."""

    def __init__(self, root: Path | None, names: list[str]) -> None:
        self.root = root
        self.index = {name: i for i, name in enumerate(names)}

    def check_manifest(self, manifest: dict[str, Any]) -> None:
        if self.root is None:
            return
        path = self.root / "manifest.json"
        expected = json.loads(atomic.to_json(manifest))
        if path.is_file():
            found = json.loads(path.read_text(encoding="utf-8"))
            # a store written before a config field existed holds that field's default value
            config = found.get("config")
            if isinstance(config, dict) and config.get("estimator") == "flow":
                for key, value in _ADDED_FLOW_DEFAULTS.items():
                    config.setdefault(key, value)
            if found != expected:
                differing = sorted(k for k in set(found) | set(expected) if found.get(k) != expected.get(k))
                raise ValueError(
                    f"store_dir {self.root} holds a different run (differs in: {', '.join(differing)}); "
                    "use another folder"
                )
        else:
            atomic.write_json(path, manifest)

    def _marg(self, target: str, ext: str) -> Path:
        assert self.root is not None
        return self.root / "marginals" / f"t{self.index[target]}{ext}"

    def _pair(self, source: str, target: str, ext: str) -> Path:
        assert self.root is not None
        return self.root / "pairs" / f"s{self.index[source]}_t{self.index[target]}{ext}"

    def load_marginal(self, target: str, n_val: int) -> tuple[dict[str, Any], np.ndarray] | None:
        if self.root is None or not self._marg(target, ".json").is_file():
            return None
        record = json.loads(self._marg(target, ".json").read_text(encoding="utf-8"))
        logp = atomic.read_npy(self._marg(target, ".npy"))
        if logp.shape != (n_val,):
            raise ValueError(f"stored marginal of {target!r} has shape {logp.shape}, expected ({n_val},)")
        return record, logp

    def marginal_state(self, target: str, device: torch.device) -> dict[str, torch.Tensor] | None:
        if self.root is None or not self._marg(target, ".pt").is_file():
            return None
        return torch.load(self._marg(target, ".pt"), map_location=device, weights_only=True)

    def save_marginal(
        self, target: str, record: dict[str, Any], logp: np.ndarray, state: dict | None
    ) -> None:
        if self.root is None:
            return
        if state is not None:
            path = self._marg(target, ".pt")
            atomic.atomic_write(path, lambda tmp: torch.save({k: v.cpu() for k, v in state.items()}, tmp))
        atomic.write_npy(self._marg(target, ".npy"), logp)
        atomic.write_json(self._marg(target, ".json"), record)

    def load_pair(self, source: str, target: str, n_val: int) -> tuple[dict[str, Any], np.ndarray] | None:
        if self.root is None or not self._pair(source, target, ".json").is_file():
            return None
        record = json.loads(self._pair(source, target, ".json").read_text(encoding="utf-8"))
        logp = atomic.read_npy(self._pair(source, target, ".npy"))
        if logp.shape != (n_val,):
            raise ValueError(
                f"stored pair {source!r} -> {target!r} has shape {logp.shape}, expected ({n_val},)"
            )
        return record, logp

    def save_pair(self, source: str, target: str, record: dict[str, Any], logp: np.ndarray) -> None:
        if self.root is None:
            return
        atomic.write_npy(self._pair(source, target, ".npy"), logp)
        atomic.write_json(self._pair(source, target, ".json"), record)


def _task_device(device: str | torch.device | None) -> torch.device:
    return device if isinstance(device, torch.device) else pick_device(device)


def _quiet_readonly_arrays() -> None:
    """Arrays shared through an object store are read-only; torch warns when it wraps them."""
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


def _fit_summary(outcome: Any) -> dict[str, Any]:
    return {
        "nll_train": outcome.nll_train,
        "nll_val": outcome.nll_val,
        "epochs": outcome.epochs,
        "seconds": outcome.seconds,
        "logp_val": outcome.logp_val,
    }


def _marginal_task(
    cfg: FlowConfig | GMMConfig,
    v_train: np.ndarray,
    v_val: np.ndarray,
    seed: int,
    device: str | torch.device | None,
) -> dict[str, Any]:
    """Train the marginal of one target: a pure function of its arguments (any process, any executor).

    ``v_train`` (n_train, d_v), ``v_val`` (n_val, d_v) are standardised. Returns the fit summary
    (``logp_val`` (n_val,) float64) and, for flows, the CPU ``state`` dict the conditionals start from.
    """
    _quiet_readonly_arrays()
    dev = _task_device(device)
    if isinstance(cfg, FlowConfig):
        outcome = flows._fit_marginal(v_train, v_val, cfg, seed, dev)
        state = {k: v.detach().cpu().clone() for k, v in outcome.model.state_dict().items()}
    else:
        outcome = gmm._fit_marginal(v_train, v_val, cfg, seed, dev)
        state = None
    return {**_fit_summary(outcome), "state": state}


def _conditional_task(
    cfg: FlowConfig | GMMConfig,
    u_train: np.ndarray,
    u_val: np.ndarray,
    v_train: np.ndarray,
    v_val: np.ndarray,
    marginal_state: dict[str, torch.Tensor] | None,
    d_target: int,
    marg_seed: int,
    pair_seed: int,
    device: str | torch.device | None,
) -> dict[str, Any]:
    """Train the conditional of one pair: a pure function of its arguments (any process, any executor).

    ``u_*`` (n, d_u) and ``v_*`` (n, d_v) are standardised and row-aligned. Flows start from the
    marginal rebuilt from ``marginal_state`` (bit-identical to the trained one). Returns the fit summary.
    """
    _quiet_readonly_arrays()
    dev = _task_device(device)
    if isinstance(cfg, FlowConfig):
        if marginal_state is None:
            raise ValueError("a conditional flow needs its target's marginal weights")
        marginal = flows.build_marginal(d_target, cfg, marg_seed).to(dev)
        marginal.load_state_dict(marginal_state)
        marginal.eval()
        outcome = flows._fit_conditional(marginal, u_train, v_train, u_val, v_val, cfg, pair_seed)
    else:
        outcome = gmm._fit_conditional(u_train, v_train, u_val, v_val, cfg, pair_seed, dev)
    return _fit_summary(outcome)


def _conditional_group_task(
    cfg: FlowConfig,
    v_train: np.ndarray,
    v_val: np.ndarray,
    marginal_state: dict[str, torch.Tensor],
    d_target: int,
    marg_seed: int,
    pair_seeds: list[int],
    device: str | torch.device | None,
    *sources: Any,
) -> list[dict[str, Any]]:
    """Train the conditionals of several pairs of one target as one batched flow (see ``_batched``).

    ``sources`` is ``u_train_1, u_val_1, u_train_2, u_val_2, ...`` ((n, d_u) each; flat, so that a
    remote executor resolves every shared array), one pair per seed of ``pair_seeds``. Returns one fit
    summary per pair, in order.
    """
    from flare_core.analyses.sufficiency._batched import fit_conditionals_batched

    _quiet_readonly_arrays()
    if len(sources) != 2 * len(pair_seeds):
        raise ValueError(f"expected {2 * len(pair_seeds)} source arrays, got {len(sources)}")
    dev = _task_device(device)
    marginal = flows.build_marginal(d_target, cfg, marg_seed).to(dev)
    marginal.load_state_dict(marginal_state)
    marginal.eval()
    triples = [(sources[2 * k], sources[2 * k + 1], seed) for k, seed in enumerate(pair_seeds)]
    outcomes = fit_conditionals_batched(marginal, triples, v_train, v_val, cfg)
    return [_fit_summary(outcome) for outcome in outcomes]


def _resolve_executor(executor: Executor | str | None) -> tuple[Executor, bool]:
    """(executor, owned): an executor built here from a name is closed when the matrix is done."""
    if executor is None:
        return LocalExecutor(), True
    if isinstance(executor, str):
        return get_executor(executor), True
    if isinstance(executor, Executor):
        return executor, False
    raise ValueError(f"executor must be an Executor, a name {list(EXECUTORS)} or None, got {executor!r}")


_STREAM_BYTES = 256 * 2**20


def _streams(x: np.ndarray, stream: bool | None) -> bool:
    """Whether ``x`` is trained from on-the-fly mini-batches (see ``stream`` in :func:`sufficiency_matrix`)."""
    if stream is not None:
        return stream
    return isinstance(x, np.memmap) and x.nbytes > _STREAM_BYTES


def _error_text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}".strip()


def sufficiency_matrix(
    embeddings: Mapping[str, np.ndarray],
    *,
    estimator: str = "flow",
    config: FlowConfig | GMMConfig | None = None,
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
) -> SufficiencyResult:
    """Estimate IS(a -> b) for every ordered pair a != b with a in ``sources`` and b in ``targets``.

    ``embeddings[name]`` is an (n, d_name) array; all share the same n rows (the same texts, same order).
    ``estimator`` "flow" (FLARE, :class:`FlowConfig`) or "gmm" (EMIR/KNIFE, :class:`GMMConfig`).
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
    unit (plus ``"error"`` when the unit failed, and ``"worker"`` / ``"seconds"`` when an executor ran it); ``should_stop()`` is checked before each unit that
    needs training (and while waiting on a remote executor) and raises :class:`Cancelled`. With
    ``store_dir`` finished units are written as they come in and skipped on the next call.
    ``on_error``: "raise" (the default with the local executor) re-raises a unit's exception;
    "continue" (the default with a remote executor) records it in ``result.failed`` (a failed marginal
    fails its target's pairs), leaves NaN in the matrix, stores nothing for it, and goes on.

    ``stream``: True trains every unit from mini-batches gathered and standardised on the fly
    (:class:`~flare_core.analyses.sufficiency._rows.StandardizedRows`), so no standardised copy of an embedding
    is held in memory and a memory-mapped ``.npy`` (``np.load(path, mmap_mode="r")``) reaches remote
    tasks as its path; False standardises each embedding in memory once; None (default) streams the
    memory-mapped embeddings larger than 256 MiB. Both paths give bit-identical numbers.
    """
    names, arrays = _validate_embeddings(embeddings)
    sources = _validate_subset("sources", sources, names)
    targets = _validate_subset("targets", targets, names)
    cfg = _resolve_config(estimator, config)
    seed = check_int(seed, "seed")
    check_probability(val_fraction, "val_fraction", include_min=False, include_max=False)
    check_callable(progress, "progress")
    check_callable(should_stop, "should_stop")
    check_bool(stream, "stream", allow_none=True)
    check_choice(on_error, "on_error", (None, *_ON_ERROR))
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
    resources = Resources(num_cpus=1.0, num_gpus=1.0 if wants_gpu else 0.0)
    n = next(iter(arrays.values())).shape[0]

    train_on_all = isinstance(cfg, GMMConfig) and cfg.evaluate_on == "train"
    if train_on_all:
        if n < 2:
            raise ValueError(f"need at least 2 rows, got {n}")
        train_idx = val_idx = np.arange(n, dtype=np.int64)
    else:
        train_idx, val_idx = _split_indices(n, float(val_fraction), seed)
        if len(train_idx) < 2 or len(val_idx) < 2:
            raise ValueError(
                f"{n} rows with val_fraction={val_fraction} give {len(train_idx)} training and "
                f"{len(val_idx)} validation rows; need at least 2 of each"
            )
    dims = {name: int(arrays[name].shape[1]) for name in names}
    config_dict = {"estimator": estimator, **cfg.to_dict()}

    store = _Store(Path(store_dir) if store_dir is not None else None, names)
    store.check_manifest(
        {
            "format": _FORMAT,
            "names": names,
            "dims": dims,
            "config": config_dict,
            "seed": seed,
            "val_fraction": float(val_fraction),
            "n_rows": n,
            "fingerprints": {name: _fingerprint(arrays[name]) for name in names},
        }
    )

    ex, owned = _resolve_executor(executor)
    mode = on_error or ("continue" if ex.remote else "raise")
    is_flow = isinstance(cfg, FlowConfig)
    group = cfg.batch_conditionals if is_flow else 1
    n_val = len(val_idx)
    plan = [(t, [s for s in sources if s != t]) for t in targets]
    plan = [(t, srcs) for t, srcs in plan if srcs]
    total = sum(1 + len(srcs) for _, srcs in plan)
    done = 0
    marg_done: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
    pair_done: dict[tuple[str, str], tuple[dict[str, Any], np.ndarray]] = {}
    failures: list[dict[str, Any]] = []
    handles: dict[str, tuple[Any, Any]] = {}
    states: dict[str, Any] = {}
    pairs_left = {t: len(srcs) for t, srcs in plan}
    sources_of = dict(plan)

    def _data(name: str) -> tuple[Any, Any]:
        """Standardised (train, val) data of ``name``, shared through the executor once."""
        if name not in handles:
            x = arrays[name]
            mean, std = _fit_standardizer(x, train_idx)
            if _streams(x, stream):
                train = StandardizedRows(x, train_idx, mean, std)
                handles[name] = (ex.put(train), ex.put(StandardizedRows(x, val_idx, mean, std)))
            else:
                z = _standardize(x, mean, std)
                handles[name] = (ex.put(z[train_idx]), ex.put(z[val_idx]))
        return handles[name]

    def _state(target: str) -> Any:
        if target not in states:
            state = store.marginal_state(target, torch.device("cpu"))
            if state is None:
                raise ValueError(
                    f"the stored marginal of {target!r} has no weights file; delete its record and rerun"
                )
            states[target] = ex.put(state)
        return states[target]

    def _report(
        stage: str,
        source: str | None,
        target: str,
        resumed: bool,
        error: str | None = None,
        outcome: Outcome | None = None,
    ) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            event = {
                "stage": stage,
                "source": source,
                "target": target,
                "done": done,
                "total": total,
                "resumed": resumed,
            }
            if error is not None:
                event["error"] = error
            if outcome is not None:
                event.update(worker=outcome.worker, seconds=outcome.seconds)
            progress(event)

    def _check_stop() -> None:
        if should_stop is not None and should_stop():
            raise Cancelled(f"cancelled after {done} of {total} units")

    def _pair_finished(target: str) -> None:
        pairs_left[target] -= 1
        if pairs_left[target] == 0:
            states.pop(target, None)

    def _fail(
        stage: str, source: str | None, target: str, error: str, outcome: Outcome | None = None
    ) -> None:
        failures.append({"stage": stage, "source": source, "target": target, "error": error})
        _report(stage, source, target, False, error, outcome)

    def _marginal_finished(
        target: str,
        record: dict[str, Any],
        logp: np.ndarray,
        resumed: bool,
        outcome: Outcome | None = None,
    ) -> None:
        marg_done[target] = (record, logp)
        _report("marginal", None, target, resumed, outcome=outcome)
        srcs = sources_of[target]
        if group > 1:
            ready.extend(
                ("conditionals", target, tuple(srcs[a : a + group])) for a in range(0, len(srcs), group)
            )
        else:
            ready.extend(("conditional", s, target) for s in srcs)

    def _pair_record(source: str, target: str, fit: dict[str, Any]) -> dict[str, Any]:
        marg_record, marg_logp = marg_done[target]
        nll_marg_val = float(-np.mean(marg_logp))
        nll_cond_val = fit["nll_val"]
        is_nats = nll_marg_val - nll_cond_val
        return {
            "source": source,
            "target": target,
            "d_source": dims[source],
            "d_target": dims[target],
            "nll_marg_train": marg_record["nll_train"],
            "nll_marg_val": nll_marg_val,
            "nll_cond_train": fit["nll_train"],
            "nll_cond_val": nll_cond_val,
            "is_nats": is_nats,
            "is_per_dim": is_nats / dims[target],
            "delta_emp_marg": abs(nll_marg_val - marg_record["nll_train"]),
            "delta_emp_cond": abs(nll_cond_val - fit["nll_train"]),
            "epochs": fit["epochs"],
            "seconds": fit["seconds"],
        }

    def _start(unit: tuple) -> None:
        """Take a unit from the stored results, or submit it to the executor."""
        if unit[0] == "marginal":
            target = unit[1]
            stored = store.load_marginal(target, n_val)
            if stored is not None:
                _marginal_finished(target, stored[0], stored[1], True)
                return
            _check_stop()
            v_tr, v_va = _data(target)
            args = (cfg, v_tr, v_va, _derive_seed(seed, "marginal", target), task_device)
            ex.submit(unit, _marginal_task, args, resources)
            return
        if unit[0] == "conditionals":
            _, target, group_sources = unit
            todo = []
            for source in group_sources:
                stored_pair = store.load_pair(source, target, n_val)
                if stored_pair is None:
                    todo.append(source)
                    continue
                pair_done[(source, target)] = stored_pair
                _pair_finished(target)
                _report("conditional", source, target, True)
            if not todo:
                return
            _check_stop()
            v_tr, v_va = _data(target)
            args = (
                cfg,
                v_tr,
                v_va,
                _state(target),
                dims[target],
                _derive_seed(seed, "marginal", target),
                [_derive_seed(seed, "conditional", source, target) for source in todo],
                task_device,
                *[handle for source in todo for handle in _data(source)],
            )
            ex.submit(("conditionals", target, tuple(todo)), _conditional_group_task, args, resources)
            return
        _, source, target = unit
        stored_pair = store.load_pair(source, target, n_val)
        if stored_pair is not None:
            pair_done[(source, target)] = stored_pair
            _pair_finished(target)
            _report("conditional", source, target, True)
            return
        _check_stop()
        u_tr, u_va = _data(source)
        v_tr, v_va = _data(target)
        args = (
            cfg,
            u_tr,
            u_va,
            v_tr,
            v_va,
            _state(target) if is_flow else None,
            dims[target],
            _derive_seed(seed, "marginal", target),
            _derive_seed(seed, "conditional", source, target),
            task_device,
        )
        ex.submit(unit, _conditional_task, args, resources)

    def _finish(outcome: Outcome) -> None:
        """Store and record a unit the executor finished (or its failure)."""
        unit = outcome.key
        if not outcome.ok:
            if mode == "raise":
                raise outcome.error  # type: ignore[misc]
            error = _error_text(outcome.error)  # type: ignore[arg-type]
            if unit[0] == "marginal":
                target = unit[1]
                _fail("marginal", None, target, error, outcome)
                for source in sources_of[target]:
                    _fail("conditional", source, target, f"the marginal of {target!r} failed ({error})")
            elif unit[0] == "conditionals":
                for source in unit[2]:
                    _pair_finished(unit[1])
                    _fail("conditional", source, unit[1], error, outcome)
            else:
                _pair_finished(unit[2])
                _fail("conditional", unit[1], unit[2], error, outcome)
            return
        fit = outcome.value
        if unit[0] == "conditionals":
            _, target, group_sources = unit
            for k, (source, pair_fit) in enumerate(zip(group_sources, fit, strict=True)):
                # the worker ran one unit for the group: count it (and its time) once
                _pair_stored(source, target, pair_fit, outcome if k == 0 else None)
            return
        if unit[0] == "marginal":
            target = unit[1]
            record = {
                "target": target,
                "d_target": dims[target],
                "nll_train": fit["nll_train"],
                "nll_val": fit["nll_val"],
                "epochs": fit["epochs"],
                "seconds": fit["seconds"],
            }
            store.save_marginal(target, record, fit["logp_val"], fit["state"])
            if is_flow and sources_of[target]:
                states[target] = ex.put(fit["state"])
            _marginal_finished(target, record, fit["logp_val"], False, outcome)
            return
        _, source, target = unit
        _pair_stored(source, target, fit, outcome)

    def _pair_stored(source: str, target: str, fit: dict[str, Any], outcome: Outcome | None) -> None:
        record = _pair_record(source, target, fit)
        store.save_pair(source, target, record, fit["logp_val"])
        pair_done[(source, target)] = (record, fit["logp_val"])
        _pair_finished(target)
        _report("conditional", source, target, False, outcome=outcome)

    # pairs whose marginal is done go before the next marginal: with one task in flight (local) this
    # is the order of a plain loop; with many, all marginals start at once and pairs follow each one
    ready: deque[tuple] = deque()
    marginals_todo: deque[tuple] = deque(("marginal", t) for t, _ in plan)
    poll = 0.5 if should_stop is not None else None
    try:
        while True:
            while ex.in_flight() < ex.max_in_flight and (ready or marginals_todo):
                _start(ready.popleft() if ready else marginals_todo.popleft())
            if not ex.in_flight():
                break
            outcome = ex.wait(timeout=poll)
            if outcome is None:
                _check_stop()
                continue
            _finish(outcome)
            if ex.in_flight():  # others still running (remote executors): stop them now if asked
                _check_stop()
    finally:
        if ex.in_flight():
            ex.cancel()
        if owned:
            ex.close()

    marg_records: list[dict[str, Any]] = []
    pair_records: list[dict[str, Any]] = []
    val_logp_marg: dict[str, np.ndarray] = {}
    val_logp_cond: dict[tuple[str, str], np.ndarray] = {}
    for target, srcs in plan:
        if target in marg_done:
            marg_records.append(marg_done[target][0])
            val_logp_marg[target] = marg_done[target][1]
        for source in srcs:
            if (source, target) in pair_done:
                pair_records.append(pair_done[(source, target)][0])
                val_logp_cond[(source, target)] = pair_done[(source, target)][1]

    is_matrix = pd.DataFrame(np.nan, index=list(sources), columns=list(targets), dtype=np.float64)
    for rec in pair_records:
        is_matrix.loc[rec["source"], rec["target"]] = rec["is_nats"]
    return SufficiencyResult(
        names=list(targets),
        sources=list(sources),
        dims=dims,
        is_matrix=is_matrix,
        records=pd.DataFrame(pair_records, columns=RECORD_COLUMNS),
        val_logp_marg=val_logp_marg,
        val_logp_cond=val_logp_cond,
        config=config_dict,
        seed=seed,
        train_idx=train_idx,
        val_idx=val_idx,
        estimator=estimator,
        marginals=pd.DataFrame(marg_records, columns=MARGINAL_COLUMNS),
        failed=pd.DataFrame(failures, columns=FAILED_COLUMNS),
    )
