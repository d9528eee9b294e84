"""Information sufficiency between embedders: the estimator protocol and its registry, FLARE flows,
EMIR/KNIFE mixtures, the matrix, its result and the scores.

The names below are imported on first use, so that reading the registry (names and labels of the
estimators) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ESTIMATORS": "registry",
    "get_estimator": "registry",
    "Estimator": "estimator",
    "FlowConfig": "flow_model",
    "FlowEstimator": "flows",
    "GMMConfig": "gmm",
    "GMMEstimator": "gmm",
    "SufficiencyResult": "result",
    "sufficiency_matrix": "matrix",
    "all_scores": "scores",
    "indistinguishable": "scores",
    "model_scores": "scores",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
