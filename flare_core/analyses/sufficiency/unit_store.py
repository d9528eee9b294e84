"""Per-unit persistence of a sufficiency matrix: every finished marginal and pair, written as it comes in.

Layout (indices are positions in the manifest's ``names``, so any model name is safe)::

    manifest.json                 names, dims, estimator, config, seed, split, data fingerprints
    marginals/t{j}.json|.npy|.pt  record, validation log p (n_val,), flow state_dict (flow only)
    pairs/s{i}_t{j}.json|.npy     record, validation log p(v|u) (n_val,)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flare_core.store import atomic

# configuration fields added after stores were first written, with the value those stores were trained with
_ADDED_DEFAULTS = {
    "flow": {
        "autocast": False,
        "batch_conditionals": 1,
        "batch_targets": 1,
        "even_batches": False,
        "fused_adam": False,
    },
    "gmm": {"covariance": "diagonal", "input_norm": True, "warm_start": False, "skip": False, "init": "rows"},
}
_CHUNK_ROWS = 8192


def row_chunks(arr: np.ndarray) -> Sequence[np.ndarray]:
    """Consecutive row blocks of ``arr`` (n, d), so a memory-mapped array is read a block at a time."""
    return [arr[start : start + _CHUNK_ROWS] for start in range(0, max(len(arr), 1), _CHUNK_ROWS)]


def fingerprint(arr: np.ndarray) -> str:
    """sha256 of the shape and the float64 C-order bytes of ``arr`` (hashed a row block at a time)."""
    h = hashlib.sha256()
    h.update(str(arr.shape).encode())
    for block in row_chunks(arr):
        h.update(np.ascontiguousarray(block, dtype=np.float64).tobytes())
    return h.hexdigest()


def _completed(config: dict[str, Any]) -> dict[str, Any]:
    """A stored estimator configuration with the values of the fields added since it was written (a store
    written before a config field existed holds that field's earlier behaviour)."""
    return {**_ADDED_DEFAULTS.get(config.get("estimator"), {}), **config}


def stored_config(root: Path) -> dict[str, Any] | None:
    """The estimator configuration of the units stored under ``root`` (``estimator`` included), with the
    values of fields added since it was written; None when nothing is stored there."""
    path = root / "manifest.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8")).get("config")
    return _completed(config) if isinstance(config, dict) else None


class UnitStore:
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
            if isinstance(found.get("config"), dict):
                found["config"] = _completed(found["config"])
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
