"""Pairs of embeddings whose information sufficiency is known exactly: the rungs of a ladder of truth.

Every pair is jointly Gaussian before any nonlinear map, so I(U; V) has a closed form::

    I(U; V) = 1/2 log det Σ_V - 1/2 log det (Σ_V - Σ_VU Σ_U^-1 Σ_UV)        (nats)

- :func:`full_rank_pair`: U ~ N(0, I_d), V = U W^T + σ ε, W (d, d) with N(0, 1/d) entries: every
  coordinate of V carries information (the 8-dimensional check of the estimators).
- :func:`latent_pair`: U = z W_u + σ_d ε_u and V = z W_v + σ_d ε_v (n, d) driven by ``latent`` shared
  factors z ~ N(0, I_k) (W (k, d) with N(0, 1/k) entries, so each coordinate's signal has unit variance).
  The noise grows with the width, σ_d = ``noise`` · sqrt(d / 64), so that I(U; V) stays near 8 nats at
  every width and a ladder over d measures the width alone, as in embeddings whose many coordinates
  repeat a few directions of meaning.
- ``cubic=True`` pushes V, standardised per coordinate, through v + 0.3 v^3: strictly increasing
  coordinate by coordinate, so invertible and I(U; V) is unchanged, but V is no longer Gaussian.
- :func:`shuffled` pairs each U with another row's V: I = 0.
- :func:`projected_information`: the information left in fixed linear projections of a Gaussian pair
  (what PCA whitening to fewer dimensions keeps), the ceiling of an estimator fitted in those coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flare_core.checks import check_int, check_number

#: Width at which ``latent_pair``'s noise equals ``noise``; wider pairs get sqrt(d / 64) times more.
REFERENCE_WIDTH = 64
CUBIC_STRENGTH = 0.3


@dataclass(frozen=True)
class KnownPair:
    """A source ``u`` (n, d_u) and target ``v`` (n, d_v), float32, with their mutual information
    ``information`` in nats (0 for a shuffled pair). ``cov_u`` (d_u, d_u), ``cov_v`` (d_v, d_v) and
    ``cov_vu`` (d_v, d_u) are the population covariances of the Gaussian pair before any nonlinear map
    (None after one)."""

    u: np.ndarray
    v: np.ndarray
    information: float
    cov_u: np.ndarray | None = None
    cov_v: np.ndarray | None = None
    cov_vu: np.ndarray | None = None


def gaussian_information(cov_u: np.ndarray, cov_v: np.ndarray, cov_vu: np.ndarray) -> float:
    """I(U; V) in nats of a jointly Gaussian pair: cov_u (d_u, d_u), cov_v (d_v, d_v), cov_vu (d_v, d_u)."""
    cov_u, cov_v, cov_vu = (np.asarray(c, dtype=np.float64) for c in (cov_u, cov_v, cov_vu))
    if cov_u.ndim != 2 or cov_v.ndim != 2 or cov_vu.shape != (cov_v.shape[0], cov_u.shape[0]):
        raise ValueError(
            f"covariances must be (d_u, d_u), (d_v, d_v) and (d_v, d_u), got {cov_u.shape}, "
            f"{cov_v.shape} and {cov_vu.shape}"
        )
    return _information(cov_u, cov_v, cov_vu)


def _information(cov_u: np.ndarray, cov_v: np.ndarray, cov_vu: np.ndarray) -> float:
    residual = cov_v - cov_vu @ np.linalg.solve(cov_u, cov_vu.T)
    return float(0.5 * (np.linalg.slogdet(cov_v)[1] - np.linalg.slogdet(residual)[1]))


def full_rank_pair(n: int, d: int, *, sigma: float = 0.5, cubic: bool = False, seed: int = 0) -> KnownPair:
    """U ~ N(0, I_d), V = U W^T + ``sigma`` ε: (n, d) each, every coordinate informative."""
    check_int(n, "n", min_value=2)
    check_int(d, "d", min_value=1)
    check_number(sigma, "sigma", min_value=0, include_min=False)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d, d)) / np.sqrt(d)
    u = rng.standard_normal((n, d))
    v = u @ w.T + sigma * rng.standard_normal((n, d))
    cov_u, cov_v, cov_vu = np.eye(d), w @ w.T + sigma**2 * np.eye(d), w
    return _pair(u, v, cov_u, cov_v, cov_vu, cubic)


def latent_pair(
    n: int, d: int, *, latent: int = 16, noise: float = 1.0, cubic: bool = False, seed: int = 0
) -> KnownPair:
    """U and V (n, d) driven by ``latent`` shared Gaussian factors (see the module docstring)."""
    check_int(n, "n", min_value=2)
    check_int(d, "d", min_value=1)
    check_int(latent, "latent", min_value=1)
    check_number(noise, "noise", min_value=0, include_min=False)
    rng = np.random.default_rng(seed)
    sigma = noise * np.sqrt(d / REFERENCE_WIDTH)
    w_u = rng.standard_normal((latent, d)) / np.sqrt(latent)
    w_v = rng.standard_normal((latent, d)) / np.sqrt(latent)
    z = rng.standard_normal((n, latent))
    u = z @ w_u + sigma * rng.standard_normal((n, d))
    v = z @ w_v + sigma * rng.standard_normal((n, d))
    cov_u = w_u.T @ w_u + sigma**2 * np.eye(d)
    cov_v = w_v.T @ w_v + sigma**2 * np.eye(d)
    return _pair(u, v, cov_u, cov_v, w_v.T @ w_u, cubic)


def _pair(
    u: np.ndarray, v: np.ndarray, cov_u: np.ndarray, cov_v: np.ndarray, cov_vu: np.ndarray, cubic: bool
) -> KnownPair:
    information = _information(cov_u, cov_v, cov_vu)
    if cubic:
        return KnownPair(_f32(u), _f32(cubic_map(v, np.sqrt(np.diag(cov_v)))), information)
    return KnownPair(_f32(u), _f32(v), information, cov_u, cov_v, cov_vu)


def cubic_map(v: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``x + 0.3 x^3`` with ``x = v / scale`` per coordinate: v (n, d), scale (d,) -> (n, d), invertible."""
    x = np.asarray(v, dtype=np.float64) / np.asarray(scale, dtype=np.float64)
    return x + CUBIC_STRENGTH * x**3


def shuffled(pair: KnownPair, *, seed: int = 0) -> KnownPair:
    """``pair`` with its source rows permuted (seeded): U and V independent, information 0."""
    order = np.random.default_rng(seed).permutation(len(pair.u))
    return KnownPair(pair.u[order], pair.v, 0.0)


def projected_information(pair: KnownPair, proj_u: np.ndarray, proj_v: np.ndarray) -> float:
    """I(U P_u; V P_v) of a Gaussian ``pair`` for projections proj_u (d_u, k_u) and proj_v (d_v, k_v).

    The information an estimator fitted in those coordinates can at best recover (<= ``pair.information``).
    """
    if pair.cov_u is None or pair.cov_v is None or pair.cov_vu is None:
        raise ValueError("the pair went through a nonlinear map: its projections have no closed form")
    p_u, p_v = np.asarray(proj_u, dtype=np.float64), np.asarray(proj_v, dtype=np.float64)
    if p_u.ndim != 2 or p_u.shape[0] != pair.cov_u.shape[0]:
        raise ValueError(f"proj_u must have shape ({pair.cov_u.shape[0]}, k), got {p_u.shape}")
    if p_v.ndim != 2 or p_v.shape[0] != pair.cov_v.shape[0]:
        raise ValueError(f"proj_v must have shape ({pair.cov_v.shape[0]}, k), got {p_v.shape}")
    return _information(p_u.T @ pair.cov_u @ p_u, p_v.T @ pair.cov_v @ p_v, p_v.T @ pair.cov_vu @ p_u)


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)
