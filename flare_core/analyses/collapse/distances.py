"""The distances between two texts' token distributions, one pair at a time (SOCM paper, Eq. 3-8, 30).

For a text with token states ``X`` of shape ``(n, d)``: ``X_norm = X / ||mu(X)||``; ``d_mu = ||mu_1 -
mu_2||^2 / 4``; ``d_sigma = BW^2(Sigma_1, Sigma_2) / 4`` with biased covariances;
``SOCM = (1 - d_mu)^alpha * d_sigma^beta``. The batched, exact computation for many pairs is
:func:`flare_core.analyses.collapse.batched.pair_distances`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from flare_core.checks import check_number

ArrayLike = np.ndarray | torch.Tensor


def token_matrix(x: Any, name: str) -> torch.Tensor:
    """Return ``x`` as a 2-D floating CPU/GPU tensor of shape ``(n, d)`` after checking it."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if torch.is_floating_point(t) and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values")
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} must be an array of token states, got {type(x).__name__}") from exc
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        if arr.dtype != bool and not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 2:
        raise ValueError(f"{name} must have shape (n_tokens, dim), got shape {tuple(t.shape)}")
    if t.shape[0] < 1:
        raise ValueError(f"{name} has no tokens (shape {tuple(t.shape)})")
    if t.shape[1] < 1:
        raise ValueError(f"{name} has dimension 0 (shape {tuple(t.shape)})")
    if not torch.is_floating_point(t):
        t = t.to(torch.float64)
    return t


def _check_eps(eps: float | None) -> None:
    check_number(eps, "eps", min_value=0, allow_none=True)


def _check_exponent(value: float, name: str) -> float:
    return check_number(value, name, min_value=0, include_min=False, reason="paper B.6")


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x.mean(dim=0))


def normalize_tokens(x: ArrayLike) -> torch.Tensor:
    """Scale the token states of one text so that their mean has unit norm (paper Eq. 8).

    Args:
        x: token states, shape ``(n, d)``, numpy array or tensor (any device).

    Returns:
        ``x / ||mu(x)||``, shape ``(n, d)``, same device; floating dtype kept (integers become float64).

    Raises:
        ValueError: ``x`` is not 2-D, is empty, has non-finite values, or its mean is the zero vector.
    """
    t = token_matrix(x, "x")
    norm = float(torch.linalg.vector_norm(t.to(torch.float64).mean(dim=0)))
    if not norm > 0.0:
        raise ValueError("the mean token state is the zero vector: cannot normalise (||mu(X)|| = 0)")
    return _normalize(t)


def _centred_scaled(x: torch.Tensor) -> torch.Tensor:
    """``B = (X - mu(X)) / sqrt(n)`` so that ``Sigma = B^T B``; shape ``(n, d)``."""
    return (x - x.mean(dim=0, keepdim=True)) / math.sqrt(x.shape[0])


def _bw2_exact(x1: torch.Tensor, x2: torch.Tensor) -> float:
    """Exact BW^2 between the biased covariances of ``x1 (n1, d)`` and ``x2 (n2, d)`` (float64)."""
    b1 = _centred_scaled(x1.to(torch.float64))
    b2 = _centred_scaled(x2.to(torch.float64))
    nuclear = torch.linalg.svdvals(b1 @ b2.T).sum()
    bw2 = (b1 * b1).sum() + (b2 * b2).sum() - 2.0 * nuclear
    return max(float(bw2), 0.0)


def _sqrtm_eps(a: torch.Tensor, eps: float) -> torch.Tensor:
    """Square root of a symmetric PSD ``(d, d)`` matrix via ``eigh(a + eps I)``, as the reference does."""
    a = 0.5 * (a + a.T) + eps * torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    w, v = torch.linalg.eigh(a)
    return (v * w.clamp_min(0.0).sqrt()) @ v.T


def _bw2_reference(x1: torch.Tensor, x2: torch.Tensor, eps: float) -> float:
    """``d x d`` eigendecomposition BW^2 with ``eps`` on the diagonal of each square root (float64)."""
    b1 = _centred_scaled(x1.to(torch.float64))
    b2 = _centred_scaled(x2.to(torch.float64))
    s1, s2 = b1.T @ b1, b2.T @ b2
    r1 = _sqrtm_eps(s1, eps)
    fid = torch.trace(_sqrtm_eps(r1 @ s2 @ r1, eps))
    return float(torch.trace(s1) + torch.trace(s2) - 2.0 * fid)


def bw2_reference_eps(x1: ArrayLike, x2: ArrayLike, eps: float = 1e-9) -> float:
    """Bures-Wasserstein^2 computed like the public reference (slow ``d x d`` path).

    ``BW^2 = tr S1 + tr S2 - 2 tr sqrtm_eps(R1 S2 R1)``, ``R1 = sqrtm_eps(S1)``, where ``S_i`` are the
    biased covariances of the rows of ``x_i`` and ``sqrtm_eps(A) = V diag(sqrt(max(w, 0))) V^T`` with
    ``(w, V) = eigh(A + eps I)``. Traces use the covariances without ``eps``. Each null direction of
    ``R1 S2 R1`` contributes ``sqrt(eps)`` to the last trace, so the result sits about
    ``2 (d - rank(S1^1/2 S2 S1^1/2)) sqrt(eps)`` below the exact value (and may be slightly negative).
    Cost ``O(d^3)`` per pair; used with ``eps`` given in :func:`pair_distances` and as the naive
    reference in the benchmark.

    Args:
        x1: token states of text 1, shape ``(n1, d)`` (normalise first for ``d_sigma = BW^2 / 4``).
        x2: token states of text 2, shape ``(n2, d)``.
        eps: diagonal jitter, ``>= 0`` (the reference uses ``1e-9``).

    Returns:
        ``BW^2`` as a Python float (float64 arithmetic).
    """
    _check_eps(eps)
    if eps is None:
        raise ValueError(
            "eps must be a number for bw2_reference_eps; use bures_wasserstein2 for the exact value"
        )
    t1, t2 = token_matrix(x1, "x1"), token_matrix(x2, "x2")
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    return _bw2_reference(t1.cpu(), t2.cpu(), float(eps))


def bures_wasserstein2(
    x1: ArrayLike, x2: ArrayLike, *, eps: float | None = None, normalize: bool = False
) -> float:
    """Squared Bures-Wasserstein distance between the token covariances of two texts.

    Works on the rows as given (raw or already normalised): ``BW^2(Sigma(x1), Sigma(x2))`` with biased
    ``1/n`` covariances. With ``normalize=True`` both texts are first scaled by ``1/||mu||`` (paper
    Eq. 8), so that ``d_sigma = bures_wasserstein2(x1, x2, normalize=True) / 4``. Scaling both inputs
    by ``c`` scales the raw result by ``c^2``.

    Args:
        x1: token states of text 1, shape ``(n1, d)``.
        x2: token states of text 2, shape ``(n2, d)``.
        eps: ``None`` for the exact value (nuclear norm of ``B1 B2^T`` in float64, tiny negative
            rounding clamped to 0); a number to reproduce the reference ``d x d`` path
            (:func:`bw2_reference_eps`), not clamped.
        normalize: scale each text to a unit-norm mean first.

    Returns:
        ``BW^2`` as a Python float.
    """
    _check_eps(eps)
    t1, t2 = token_matrix(x1, "x1"), token_matrix(x2, "x2")
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    if normalize:
        t1, t2 = normalize_tokens(t1), normalize_tokens(t2)
    t1, t2 = t1.cpu(), t2.cpu()
    if eps is not None:
        return _bw2_reference(t1, t2, float(eps))
    return _bw2_exact(t1, t2)


def socm_value(
    d_mu: ArrayLike | float, d_sigma: ArrayLike | float, alpha: float = 1.0, beta: float = 1.0
) -> np.ndarray:
    """Generalised SOCM ``(1 - d_mu)^alpha * d_sigma^beta`` (paper Eq. 4 and Eq. 30).

    ``1 - d_mu`` is clipped at 0 (``d_mu <= 1`` holds for unit-norm means up to rounding; without
    normalisation ``d_mu`` can exceed 1) and ``d_sigma`` at 0 below; ``d_sigma`` is not clipped above
    (it exceeds 1 only when the trace bound ``tr Sigma <= 2`` fails).

    Args:
        d_mu: first-order distances, any shape.
        d_sigma: second-order distances, broadcastable with ``d_mu``.
        alpha, beta: exponents ``> 0``.

    Returns:
        float64 array with the broadcast shape.
    """
    alpha = _check_exponent(alpha, "alpha")
    beta = _check_exponent(beta, "beta")
    dm = np.asarray(d_mu, dtype=np.float64)
    ds = np.asarray(d_sigma, dtype=np.float64)
    if not (np.isfinite(dm).all() and np.isfinite(ds).all()):
        raise ValueError("d_mu and d_sigma must be finite")
    return np.clip(1.0 - dm, 0.0, None) ** alpha * np.clip(ds, 0.0, None) ** beta
