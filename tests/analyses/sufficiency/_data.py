"""Synthetic data with a known information sufficiency for the sufficiency tests."""

from __future__ import annotations

import numpy as np


def gaussian_pair(
    n: int, d: int, sigma: float, seed: int, orthogonal: bool = False
) -> tuple[np.ndarray, np.ndarray, float]:
    """U ~ N(0, I_d) (n, d), V = U W^T + sigma * eps (n, d); returns (U, V, true IS in nats).

    IS(U -> V) = I(U; V) = 1/2 log det(W W^T + sigma^2 I) - d log sigma. With ``orthogonal`` W is a
    random rotation, so V's marginal is isotropic (representable by a diagonal mixture).
    """
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d, d))
    w = np.linalg.qr(w)[0] if orthogonal else w / np.sqrt(d)
    u = rng.standard_normal((n, d))
    v = u @ w.T + sigma * rng.standard_normal((n, d))
    true = 0.5 * np.linalg.slogdet(w @ w.T + sigma**2 * np.eye(d))[1] - d * np.log(sigma)
    return u.astype(np.float32), v.astype(np.float32), float(true)
