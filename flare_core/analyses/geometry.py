"""Label-free geometric baselines for one embedding model.

Every function takes the embeddings of one model on one corpus, ``x`` of shape ``(N, d)``
(N texts, d dimensions), and returns a scalar:

- :func:`uniformity` (Wang & Isola, 2020): ``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` on L2-normalised rows.
  At least ``-2t N / (N - 1)`` (Jensen; about ``-2t`` for large N) and at most 0; lower is more uniform.
- :func:`isoscore` (Rudman et al., 2022): how evenly the variance spreads over the principal axes,
  1 for an isotropic cloud, 0 for a cloud on a line.
- :func:`effective_rank` (Roy & Vetterli, 2007): ``exp(H(sigma / sum sigma))`` for the singular values
  ``sigma`` of the centred matrix; between 1 and ``min(N - 1, d)``.
- :func:`silhouette` (Rousseeuw, 1987): cosine silhouette of the labels when given, else of seeded
  k-means clusters.

:func:`geometry_report` gathers all of them with the sample sizes they used.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp
from scipy.stats import entropy
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import normalize

from flare_core.checks import check_int, check_labels, check_matrix, check_number

DEFAULT_CLUSTERS = 8


@dataclass(frozen=True)
class UniformityResult:
    """Uniformity and the pairs it was computed on.

    ``value``: the uniformity; ``n_pairs``: pairs averaged over; ``exact``: whether they were all
    ``N (N - 1) / 2`` pairs (else ``n_pairs`` seeded random pairs ``i != j``).
    """

    value: float
    n_pairs: int
    exact: bool


@dataclass(frozen=True)
class SilhouetteResult:
    """Silhouette and how it was computed.

    ``source`` is ``"labels"`` or ``"kmeans"``; ``n_clusters`` the number of distinct groups scored;
    ``n_samples`` the rows scored (all rows, or a seeded sample of ``max_samples``).
    """

    value: float
    source: str
    n_clusters: int
    n_samples: int


# ----------------------------------------------------------------------------------------------------
# validation


# ----------------------------------------------------------------------------------------------------
# computation


def _uniformity(x: np.ndarray, t: float, max_pairs: int, seed: int) -> UniformityResult:
    """Uniformity of ``x`` (N, d) with non-zero rows; exact or over ``max_pairs`` seeded pairs."""
    z = normalize(x)
    n = z.shape[0]
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, k=1)
        exact = True
    else:
        rng = np.random.default_rng(seed)
        i = rng.integers(0, n, size=max_pairs)
        j = rng.integers(0, n - 1, size=max_pairs)
        j = j + (j >= i)  # uniform over j != i
        exact = False
    # chunked so that memory stays O(chunk * d)
    sq = np.empty(i.shape[0], dtype=np.float64)
    chunk = 65_536
    for start in range(0, i.shape[0], chunk):
        a, b = z[i[start : start + chunk]], z[j[start : start + chunk]]
        sq[start : start + chunk] = np.einsum("ij,ij->i", a - b, a - b)
    value = float(logsumexp(-t * sq) - np.log(sq.shape[0]))
    return UniformityResult(value=min(value, 0.0), n_pairs=int(sq.shape[0]), exact=exact)


def _pca_variances(x: np.ndarray) -> np.ndarray:
    """Variances along the principal axes of ``x`` (N, d): shape ``(d,)``, descending, zero-padded."""
    centred = x - x.mean(axis=0, keepdims=True)
    s = np.linalg.svd(centred, compute_uv=False)
    var = np.zeros(x.shape[1], dtype=np.float64)
    var[: s.shape[0]] = s**2 / (x.shape[0] - 1)
    return var


def _isoscore(x: np.ndarray) -> float:
    """IsoScore of ``x`` (N, d), d >= 2; NaN when ``x`` has no variance."""
    var = _pca_variances(x)
    n = var.shape[0]
    norm = np.linalg.norm(var)
    if norm <= 0 or not np.isfinite(norm):
        return float("nan")
    normalised = np.sqrt(n) * var / norm
    defect = np.linalg.norm(normalised - 1.0) / np.sqrt(2.0 * (n - np.sqrt(n)))
    score = ((n - defect**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1))
    return float(np.clip(score, 0.0, 1.0))


def _effective_rank(x: np.ndarray) -> float:
    """Effective rank of the centred ``x`` (N, d); NaN when ``x`` has no variance."""
    centred = x - x.mean(axis=0, keepdims=True)
    s = np.linalg.svd(centred, compute_uv=False)
    if s.sum() <= 0:
        return float("nan")
    return float(np.exp(entropy(s)))  # scipy normalises s to a distribution; 0 log 0 = 0


def _silhouette(
    x: np.ndarray, codes: np.ndarray | None, n_clusters: int | None, max_samples: int, seed: int
) -> SilhouetteResult:
    """Cosine silhouette of ``codes`` (N,) or of seeded k-means clusters of the normalised rows."""
    n = x.shape[0]
    if codes is None:
        k = min(n_clusters if n_clusters is not None else DEFAULT_CLUSTERS, n - 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            codes = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(normalize(x))
        source = "kmeans"
    else:
        source = "labels"
    n_groups = int(np.unique(codes).shape[0])
    sample = max_samples if n > max_samples else None
    n_used = n if sample is None else max_samples
    if n_groups < 2 or n_groups > n - 1:
        return SilhouetteResult(float("nan"), source, n_groups, n_used)
    value = silhouette_score(x, codes, metric="cosine", sample_size=sample, random_state=seed)
    return SilhouetteResult(float(value), source, n_groups, n_used)


# ----------------------------------------------------------------------------------------------------
# public API


def uniformity_result(x: Any, t: float = 2.0, max_pairs: int = 200_000, seed: int = 0) -> UniformityResult:
    """Uniformity of ``x`` (N, d) with the number of pairs used (see :func:`uniformity`)."""
    arr = check_matrix(x, "x", min_rows=2)
    check_number(t, "t", min_value=0, include_min=False)
    check_int(max_pairs, "max_pairs", min_value=1)
    norms = np.linalg.norm(arr, axis=1)
    if np.any(norms == 0):
        raise ValueError(
            f"x has {int(np.sum(norms == 0))} all-zero rows; uniformity needs a direction for every row"
        )
    return _uniformity(arr, float(t), int(max_pairs), int(seed))


def uniformity(x: Any, t: float = 2.0, max_pairs: int = 200_000, seed: int = 0) -> float:
    """Uniformity loss ``log mean_{i<j} exp(-t ||x_i - x_j||^2)`` on L2-normalised rows of ``x`` (N, d).

    Exact over all ``N (N - 1) / 2`` pairs when there are at most ``max_pairs`` of them, else a mean
    over ``max_pairs`` pairs ``i != j`` drawn uniformly with ``seed``. Computed with ``logsumexp``.
    The exact value lies in ``[-2t N / (N - 1), 0]`` (Jensen's inequality, since the mean squared
    distance between unit vectors is ``2 N / (N - 1) (1 - ||mean||^2)``); it is 0 when all rows point
    the same way.

    Raises ``ValueError`` for fewer than 2 rows, non-finite entries, all-zero rows, ``t <= 0``.
    """
    return uniformity_result(x, t=t, max_pairs=max_pairs, seed=seed).value


def isoscore(x: Any) -> float:
    """IsoScore (Rudman et al., 2022) of ``x`` (N, d), d >= 2, in ``[0, 1]``.

    With ``Sigma_D`` the variances along the ``n = d`` principal axes (zero-padded when N <= d):
    ``Sigma_hat = sqrt(n) Sigma_D / ||Sigma_D||``, ``delta = ||Sigma_hat - 1|| / sqrt(2 (n - sqrt n))``,
    ``score = ((n - delta^2 (n - sqrt n))^2 - n) / (n (n - 1))``. An isotropic cloud scores 1, a
    cloud on a line 0. Invariant to rotations, translations, scaling and row order.

    Raises ``ValueError`` for fewer than 2 rows or columns, non-finite entries, or zero variance.
    """
    arr = check_matrix(x, "x", min_rows=2, min_cols=2)
    value = _isoscore(arr)
    if np.isnan(value):
        raise ValueError("x has zero variance (all rows identical); IsoScore is undefined")
    return value


def effective_rank(x: Any) -> float:
    """Effective rank (Roy & Vetterli, 2007) of ``x`` (N, d): ``exp(H(p))``, ``p = sigma / sum(sigma)``.

    ``sigma`` are the singular values of the column-centred ``x``; ``H`` is the Shannon entropy in
    nats. Between 1 and ``min(N - 1, d)``; ``k`` equal singular values give exactly ``k``.

    Raises ``ValueError`` for fewer than 2 rows, non-finite entries, or zero variance.
    """
    arr = check_matrix(x, "x", min_rows=2)
    value = _effective_rank(arr)
    if np.isnan(value):
        raise ValueError("x has zero variance (all rows identical); effective rank is undefined")
    return value


def silhouette_result(
    x: Any,
    labels: Any = None,
    n_clusters: int | None = None,
    max_samples: int = 2000,
    seed: int = 0,
) -> SilhouetteResult:
    """Silhouette of ``x`` (N, d) with how it was computed (see :func:`silhouette`)."""
    arr = check_matrix(x, "x", min_rows=3)
    check_int(max_samples, "max_samples", min_value=3)
    codes = None
    if labels is not None:
        codes = check_labels(labels, arr.shape[0])
        n_groups = int(np.unique(codes).shape[0])
        if n_groups < 2 or n_groups > arr.shape[0] - 1:
            raise ValueError(
                f"silhouette needs between 2 and N - 1 = {arr.shape[0] - 1} distinct labels; got {n_groups}"
            )
    else:
        check_int(n_clusters, "n_clusters", min_value=2, allow_none=True)
    return _silhouette(
        arr, codes, None if n_clusters is None else int(n_clusters), int(max_samples), int(seed)
    )


def silhouette(
    x: Any,
    labels: Any = None,
    n_clusters: int | None = None,
    max_samples: int = 2000,
    seed: int = 0,
) -> float:
    """Mean cosine silhouette of ``x`` (N, d), in ``[-1, 1]``.

    On ``labels`` (N,) when given; otherwise on k-means clusters of the L2-normalised rows with
    ``k = n_clusters`` (default 8) clipped to ``N - 1``, seeded with ``seed``. When ``N > max_samples``
    the score is computed on ``max_samples`` rows drawn with ``seed``. NaN when k-means finds fewer
    than 2 distinct clusters (e.g. identical rows).

    Raises ``ValueError`` for fewer than 3 rows, non-finite entries, labels of the wrong length or with
    missing values, or fewer than 2 (or more than N - 1) distinct labels.
    """
    return silhouette_result(x, labels, n_clusters=n_clusters, max_samples=max_samples, seed=seed).value


def geometry_report(
    x: Any,
    labels: Any = None,
    seed: int = 0,
    *,
    t: float = 2.0,
    max_pairs: int = 200_000,
    n_clusters: int | None = None,
    max_samples: int = 2000,
) -> dict[str, Any]:
    """All label-free baselines for ``x`` (N, d), N >= 3, d >= 2, as one flat dict.

    Keys: ``n``, ``dim``, ``uniformity``, ``uniformity_pairs``, ``uniformity_exact``, ``isoscore``,
    ``effective_rank``, ``silhouette``, ``silhouette_source`` ("labels" or "kmeans"),
    ``silhouette_clusters``, ``silhouette_samples``. A score that is undefined for these embeddings
    (zero variance, all-zero rows for uniformity, fewer than 2 clusters) is NaN instead of an error.

    Raises ``ValueError`` for malformed ``x`` or ``labels`` (see the individual functions).
    """
    arr = check_matrix(x, "x", min_rows=3, min_cols=2)
    check_number(t, "t", min_value=0, include_min=False)
    check_int(max_pairs, "max_pairs", min_value=1)
    check_int(max_samples, "max_samples", min_value=3)
    codes = None
    if labels is not None:
        codes = check_labels(labels, arr.shape[0])
    else:
        check_int(n_clusters, "n_clusters", min_value=2, allow_none=True)

    if np.any(np.linalg.norm(arr, axis=1) == 0):
        uni = UniformityResult(float("nan"), 0, False)
    else:
        uni = _uniformity(arr, float(t), int(max_pairs), int(seed))
    sil = _silhouette(
        arr, codes, None if n_clusters is None else int(n_clusters), int(max_samples), int(seed)
    )
    uni_d, sil_d = asdict(uni), asdict(sil)
    return {
        "n": int(arr.shape[0]),
        "dim": int(arr.shape[1]),
        "uniformity": uni_d["value"],
        "uniformity_pairs": uni_d["n_pairs"],
        "uniformity_exact": uni_d["exact"],
        "isoscore": _isoscore(arr),
        "effective_rank": _effective_rank(arr),
        "silhouette": sil_d["value"],
        "silhouette_source": sil_d["source"],
        "silhouette_clusters": sil_d["n_clusters"],
        "silhouette_samples": sil_d["n_samples"],
    }


def norm_statistics(x: Any) -> dict[str, float | int]:
    """Row norms of ``x`` (N, d): ``mean_norm``, ``std_norm`` (population) and ``zero_rows`` (rows of norm 0).

    ``x`` may be memory-mapped; it is read once.
    """
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"x must be a 2-D array of shape (N, d), got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1)
    return {
        "mean_norm": float(norms.mean()),
        "std_norm": float(norms.std()),
        "zero_rows": int((norms == 0).sum()),
    }
