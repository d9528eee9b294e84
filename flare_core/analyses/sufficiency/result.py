"""The result of a sufficiency matrix: IS per pair, per-sample log-likelihoods, the split and failures.

Written and read as JSON + Parquet + ``.npy`` files (atomic per file, no pickles).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.store import atomic

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
    "is_raw_nats",
    "is_raw_per_dim",
    "delta_emp_marg",
    "delta_emp_cond",
    "epochs",
    "seconds",
]
MARGINAL_COLUMNS = ["target", "d_target", "nll_train", "nll_val", "epochs", "seconds"]
FAILED_COLUMNS = ["stage", "source", "target", "error"]


@dataclass
class SufficiencyResult:
    """Everything a sufficiency run produced.

    - ``names``: targets (columns of ``is_matrix``), ``sources``: rows; ``dims[name]``: the width the
      densities were fitted in (after PCA whitening to at most ``max_dims``), ``raw_dims[name]``: the
      embedding's own width.
    - ``is_matrix``: DataFrame (sources x targets) of IS in nats on the validation split; NaN on the
      diagonal and where not computed.
    - ``records``: one row per computed pair, columns :data:`RECORD_COLUMNS`. ``is_raw_nats`` is the
      estimator's own figure before a floor: a flow's conditional starts as the marginal and keeps it
      when no trained epoch does better on the validation rows (``is_nats`` is then 0); the raw figure
      is that of its best trained epoch, negative in that case. Equal to ``is_nats`` for the mixtures;
      NaN in results written before it was recorded.
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
    max_dims: int | None = None
    raw_dims: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.raw_dims:
            self.raw_dims = dict(self.dims)

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
            "raw_dims": self.raw_dims,
            "max_dims": self.max_dims,
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
            records=_with_columns(pd.read_parquet(directory / "records.parquet"), RECORD_COLUMNS),
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
            max_dims=meta.get("max_dims"),  # results written before whitening: standardised coordinates
            raw_dims={k: int(v) for k, v in meta.get("raw_dims", meta["dims"]).items()},
        )


def _with_columns(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame`` with a NaN column for each of ``columns`` it lacks (results written before it existed)."""
    missing = [c for c in columns if c not in frame.columns]
    return frame.assign(**{c: np.nan for c in missing}) if missing else frame
