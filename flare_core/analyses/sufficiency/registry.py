"""The estimators information sufficiency can use, by name: one line each.

Reading the registry imports nothing heavy (labels and names for pages, reports and run parameters);
:func:`get_estimator` imports the estimator's module on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flare_core.analyses.sufficiency.estimator import Estimator


@dataclass(frozen=True)
class EstimatorEntry:
    """Where an estimator lives (``module:Class``), its name in full and its short name."""

    target: str
    label: str
    short_label: str


ESTIMATORS: dict[str, EstimatorEntry] = {
    "flow": EstimatorEntry(
        "flare_core.analyses.sufficiency.flows:FlowEstimator", "FLARE (normalizing flows)", "FLARE flow"
    ),
    "gmm": EstimatorEntry(
        "flare_core.analyses.sufficiency.gmm:GMMEstimator", "EMIR (Gaussian mixtures)", "EMIR mixture"
    ),
}
ESTIMATOR_NAMES = tuple(ESTIMATORS)


def estimator_label(name: str) -> str:
    """``"FLARE (normalizing flows)"`` for ``"flow"``; the name itself for an unknown estimator."""
    entry = ESTIMATORS.get(name)
    return entry.label if entry else name


def get_estimator(name: str) -> Estimator:
    """The estimator registered as ``name``; ValueError naming the choices otherwise."""
    entry = ESTIMATORS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, got {name!r}")
    module, _, cls = entry.target.partition(":")
    return getattr(importlib.import_module(module), cls)()
