"""The pairwise information-sufficiency matrix IS(U_a -> U_b) over a pool of embedders.

One seeded train/validation split is shared by every pair; each embedding is standardised per dimension
with training-split statistics; the marginal of each target is trained once and shared by all its
sources. With ``store_dir`` every finished unit (a target's marginal, a pair's conditional) is written
atomically, so a later call with the same store skips it and returns the same numbers as an
uninterrupted run.

Store layout (indices are positions in the manifest's ``names``, so any model name is safe)::

    manifest.json                 names, dims, estimator, config, seed, split, data fingerprints
    marginals/t{j}.json|.npy|.pt  record, validation log p (n_val,), flow state_dict (flow only)
    pairs/s{i}_t{j}.json|.npy     record, validation log p(v|u) (n_val,)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core import atomic
from flare_core.device import pick_device
from flare_core.sufficiency import flows, gmm
from flare_core.sufficiency._standardize import _derive_seed, _fit_standardizer, _split_indices, _standardize
from flare_core.sufficiency.flows import FlowConfig
from flare_core.sufficiency.gmm import GMMConfig

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


class Cancelled(RuntimeError):
    """Raised when ``should_stop()`` returns True between two units; finished units stay stored."""


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

    @property
    def n_val(self) -> int:
        return int(len(self.val_idx))

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
        arr = np.asarray(embeddings[name])
        if arr.ndim != 2 or arr.shape[1] < 1:
            raise ValueError(
                f"embedding {name!r} must be a 2-D array (n, d) with d >= 1, got shape {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(f"embedding {name!r} must be real-valued, got dtype {arr.dtype}")
        if not np.isfinite(arr).all():
            raise ValueError(f"embedding {name!r} has {int((~np.isfinite(arr)).sum())} non-finite entries")
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


def _fingerprint(arr: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(str(arr.shape).encode())
    h.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
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
) -> SufficiencyResult:
    """Estimate IS(a -> b) for every ordered pair a != b with a in ``sources`` and b in ``targets``.

    ``embeddings[name]`` is an (n, d_name) array; all share the same n rows (the same texts, same order).
    ``estimator`` "flow" (FLARE, :class:`FlowConfig`) or "gmm" (EMIR/KNIFE, :class:`GMMConfig`).
    Targets default to every name, so reference models can be targets without being ranked (leave them
    out of ``sources``). Seeds: the split from ``seed``; the marginal of target b from (seed, b); the
    conditional of (a, b) from (seed, a, b) (SHA-256, independent of the order of the work).
    ``progress`` receives ``{"stage", "source", "target", "done", "total", "resumed"}`` after each
    unit; ``should_stop()`` is checked before each unit that needs training and raises
    :class:`Cancelled`. With ``store_dir`` finished units are kept and skipped on the next call.
    """
    names, arrays = _validate_embeddings(embeddings)
    sources = _validate_subset("sources", sources, names)
    targets = _validate_subset("targets", targets, names)
    cfg = _resolve_config(estimator, config)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    if not (isinstance(val_fraction, float | int) and 0.0 < float(val_fraction) < 1.0):
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    if should_stop is not None and not callable(should_stop):
        raise ValueError("should_stop must be callable or None")
    dev = pick_device(device)
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

    data: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in data:
            mean, std = _fit_standardizer(arrays[name][train_idx])
            z = _standardize(arrays[name], mean, std)
            data[name] = (z[train_idx], z[val_idx])
        return data[name]

    plan = [(t, [s for s in sources if s != t]) for t in targets]
    plan = [(t, srcs) for t, srcs in plan if srcs]
    total = sum(1 + len(srcs) for _, srcs in plan)
    done = 0
    n_val = len(val_idx)
    marg_records: list[dict[str, Any]] = []
    pair_records: list[dict[str, Any]] = []
    val_logp_marg: dict[str, np.ndarray] = {}
    val_logp_cond: dict[tuple[str, str], np.ndarray] = {}

    def _report(stage: str, source: str | None, target: str, resumed: bool) -> None:
        if progress is not None:
            progress(
                {
                    "stage": stage,
                    "source": source,
                    "target": target,
                    "done": done,
                    "total": total,
                    "resumed": resumed,
                }
            )

    def _check_stop() -> None:
        if should_stop is not None and should_stop():
            raise Cancelled(f"cancelled after {done} of {total} units")

    for target, srcs in plan:
        marg_seed = _derive_seed(seed, "marginal", target)
        marginal_model = None
        stored = store.load_marginal(target, n_val)
        if stored is None:
            _check_stop()
            v_tr, v_va = _data(target)
            if isinstance(cfg, FlowConfig):
                outcome = flows._fit_marginal(v_tr, v_va, cfg, marg_seed, dev)
            else:
                outcome = gmm._fit_marginal(v_tr, v_va, cfg, marg_seed, dev)
            marg_record = {
                "target": target,
                "d_target": dims[target],
                "nll_train": outcome.nll_train,
                "nll_val": outcome.nll_val,
                "epochs": outcome.epochs,
                "seconds": outcome.seconds,
            }
            marg_logp = outcome.logp_val
            state = outcome.model.state_dict() if isinstance(cfg, FlowConfig) else None
            store.save_marginal(target, marg_record, marg_logp, state)
            marginal_model = outcome.model
            resumed = False
        else:
            marg_record, marg_logp = stored
            resumed = True
        marg_records.append(marg_record)
        val_logp_marg[target] = marg_logp
        done += 1
        _report("marginal", None, target, resumed)

        for source in srcs:
            stored_pair = store.load_pair(source, target, n_val)
            if stored_pair is None:
                _check_stop()
                pair_seed = _derive_seed(seed, "conditional", source, target)
                u_tr, u_va = _data(source)
                v_tr, v_va = _data(target)
                if isinstance(cfg, FlowConfig):
                    if marginal_model is None:
                        marginal_model = _reload_marginal(store, target, dims[target], cfg, marg_seed, dev)
                    outcome = flows._fit_conditional(marginal_model, u_tr, v_tr, u_va, v_va, cfg, pair_seed)
                else:
                    outcome = gmm._fit_conditional(u_tr, v_tr, u_va, v_va, cfg, pair_seed, dev)
                nll_marg_val = float(-np.mean(marg_logp))
                nll_cond_val = outcome.nll_val
                is_nats = nll_marg_val - nll_cond_val
                record = {
                    "source": source,
                    "target": target,
                    "d_source": dims[source],
                    "d_target": dims[target],
                    "nll_marg_train": marg_record["nll_train"],
                    "nll_marg_val": nll_marg_val,
                    "nll_cond_train": outcome.nll_train,
                    "nll_cond_val": nll_cond_val,
                    "is_nats": is_nats,
                    "is_per_dim": is_nats / dims[target],
                    "delta_emp_marg": abs(nll_marg_val - marg_record["nll_train"]),
                    "delta_emp_cond": abs(nll_cond_val - outcome.nll_train),
                    "epochs": outcome.epochs,
                    "seconds": outcome.seconds,
                }
                logp = outcome.logp_val
                store.save_pair(source, target, record, logp)
                resumed = False
            else:
                record, logp = stored_pair
                resumed = True
            pair_records.append(record)
            val_logp_cond[(source, target)] = logp
            done += 1
            _report("conditional", source, target, resumed)
        del marginal_model

    is_matrix = pd.DataFrame(np.nan, index=list(sources), columns=list(targets), dtype=np.float64)
    for rec in pair_records:
        is_matrix.loc[rec["source"], rec["target"]] = rec["is_nats"]
    records = pd.DataFrame(pair_records, columns=RECORD_COLUMNS)
    marginals = pd.DataFrame(marg_records, columns=MARGINAL_COLUMNS)
    return SufficiencyResult(
        names=list(targets),
        sources=list(sources),
        dims=dims,
        is_matrix=is_matrix,
        records=records,
        val_logp_marg=val_logp_marg,
        val_logp_cond=val_logp_cond,
        config=config_dict,
        seed=seed,
        train_idx=train_idx,
        val_idx=val_idx,
        estimator=estimator,
        marginals=marginals,
    )


def _reload_marginal(
    store: _Store, target: str, features: int, cfg: FlowConfig, marg_seed: int, device: torch.device
) -> torch.nn.Module:
    """Rebuild a stored marginal flow from its state_dict."""
    state = store.marginal_state(target, device)
    if state is None:
        raise ValueError(
            f"the stored marginal of {target!r} has no weights file; delete its record and rerun"
        )
    model = flows.build_marginal(features, cfg, marg_seed).to(device)
    model.load_state_dict(state)
    model.eval()
    return model
