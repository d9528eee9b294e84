"""FLARE Studio: choose a text-embedding model for your own documents, without labels.

The names below are the library's small public API; each is imported on first use so that
``import flare_core`` stays fast (torch and the models load only when needed)::

    import flare_core as fc
    corpus = fc.load_corpus("docs.csv")
    store = fc.RunStore("runs")
    run = fc.create_run(store, corpus, fc.RunParams(models=["all-MiniLM-L6-v2", "glove-6b-50d"]))
    fc.execute(run)
    fc.run_results(run)["sufficiency"]["flow"]["scores"]
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_corpus": "flare_core.data.corpus",
    "Corpus": "flare_core.data.corpus",
    "CorpusError": "flare_core.errors",
    "list_models": "flare_core.encoders",
    "load_encoder": "flare_core.encoders",
    "embed": "flare_core.encoders",
    "load_precomputed": "flare_core.encoders",
    "sufficiency_matrix": "flare_core.analyses.sufficiency",
    "model_scores": "flare_core.analyses.sufficiency",
    "pair_distances": "flare_core.analyses.collapse",
    "layer_concentration": "flare_core.analyses.concentration",
    "geometry_report": "flare_core.analyses.geometry",
    "downstream_report": "flare_core.choosing.downstream",
    "correlation_table": "flare_core.analyses.correlate",
    "RunStore": "flare_core.store.runs",
    "RunParams": "flare_core.run.params",
    "create_run": "flare_core.run.create",
    "run_results": "flare_core.view.results",
}
__all__ = sorted(_EXPORTS) + ["execute"]


def execute(run: Any) -> str:
    """Execute a stored run in this process (progress in its manifest); return its final status."""
    from flare_core.run.jobs import run_in_process

    return run_in_process(run)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'flare_core' has no attribute {name!r}")
