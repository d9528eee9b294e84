"""Information sufficiency between embedders: FLARE flows, EMIR/KNIFE mixtures, matrix and scores."""

from __future__ import annotations

from flare_core.analyses.sufficiency.flows import FlowConfig
from flare_core.analyses.sufficiency.gmm import GMMConfig
from flare_core.analyses.sufficiency.matrix import sufficiency_matrix
from flare_core.analyses.sufficiency.result import SufficiencyResult
from flare_core.analyses.sufficiency.scores import all_scores, indistinguishable, model_scores

__all__ = [
    "FlowConfig",
    "GMMConfig",
    "SufficiencyResult",
    "all_scores",
    "indistinguishable",
    "model_scores",
    "sufficiency_matrix",
]
