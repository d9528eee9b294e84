"""Second-order collapse by mean pooling (SOCM; Hara et al., papers/socm_mean_pooling_collapse.txt).

For a text with token states ``X`` of shape ``(n, d)`` (one row per token, special tokens included):

* ``X_norm = X / ||mu(X)||`` so that the mean-pooled embedding has unit norm (paper Eq. 8);
* ``d_mu = ||mu_1 - mu_2||^2 / 4`` in ``[0, 1]`` (Eq. 5);
* ``d_sigma = BW^2(Sigma_1, Sigma_2) / 4`` with biased (``1/n``) covariances (Eq. 3, 6);
* ``SOCM_{alpha,beta} = (1 - d_mu)^alpha * d_sigma^beta`` (Eq. 4 for ``alpha = beta = 1``, Eq. 30).

Modules: :mod:`.distances` (one pair, the reference ``d x d`` path), :mod:`.pairs` (which pairs),
:mod:`.batched` (:func:`pair_distances`: many pairs at once, exact, without ``d x d`` square roots; its
docstring has the numerical notes), :mod:`.summary` (statistics, most collapsed pairs, token view).
"""

from __future__ import annotations

from flare_core.analyses.collapse.batched import PAIR_COLUMNS, pair_distances
from flare_core.analyses.collapse.distances import (
    bures_wasserstein2,
    bw2_reference_eps,
    normalize_tokens,
    socm_value,
)
from flare_core.analyses.collapse.pairs import sample_pairs
from flare_core.analyses.collapse.summary import (
    collapse_summary,
    most_collapsed,
    normalized_trace,
    token_view,
)

__all__ = [
    "PAIR_COLUMNS",
    "bures_wasserstein2",
    "bw2_reference_eps",
    "collapse_summary",
    "most_collapsed",
    "normalize_tokens",
    "normalized_trace",
    "pair_distances",
    "sample_pairs",
    "socm_value",
    "token_view",
]
