"""What to read off the pairs of a collapse computation: summary statistics, the most collapsed pairs, the
token view of one pair (SOCM paper, Figure 1) and each text's normalised trace."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.analyses.collapse.batched import PAIR_COLUMNS
from flare_core.analyses.collapse.distances import ArrayLike, normalize_tokens, token_matrix
from flare_core.checks import check_int

_SUMMARY_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _check_pair_frame(df: Any, columns: Sequence[str]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"expected a DataFrame from pair_distances, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"DataFrame is missing columns {missing}; expected those of pair_distances: {PAIR_COLUMNS}"
        )
    return df


def collapse_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Summary statistics of a :func:`pair_distances` frame.

    Returns:
        ``{"n_pairs": P, "socm": stats, "d_mu": stats, "d_sigma": stats}`` where ``stats`` has
        ``mean``, ``std``, ``min``, ``q05``, ``q25``, ``median``, ``q75``, ``q95``, ``max`` (floats; NaN
        when ``P = 0``).
    """
    _check_pair_frame(df, ["d_mu", "d_sigma", "socm"])
    out: dict[str, Any] = {"n_pairs": len(df)}
    for col in ("socm", "d_mu", "d_sigma"):
        v = df[col].to_numpy(dtype=np.float64)
        if v.size == 0:
            out[col] = dict.fromkeys(
                ("mean", "std", "min", "q05", "q25", "median", "q75", "q95", "max"), math.nan
            )
            continue
        q = np.quantile(v, _SUMMARY_QUANTILES)
        out[col] = {
            "mean": float(v.mean()),
            "std": float(v.std(ddof=0)),
            "min": float(v.min()),
            "q05": float(q[0]),
            "q25": float(q[1]),
            "median": float(q[2]),
            "q75": float(q[3]),
            "q95": float(q[4]),
            "max": float(v.max()),
        }
    return out


def most_collapsed(df: pd.DataFrame, k: int = 20) -> pd.DataFrame:
    """The ``k`` pairs with the largest SOCM (ties broken by ``i``, then ``j``), index reset."""
    _check_pair_frame(df, ["i", "j", "socm"])
    k = check_int(k, "k", min_value=1)
    ranked = df.sort_values(["socm", "i", "j"], ascending=[False, True, True], kind="mergesort")
    return ranked.head(int(k)).reset_index(drop=True)


def token_view(
    x1: ArrayLike,
    x2: ArrayLike,
    tokens1: Sequence[str] | None = None,
    tokens2: Sequence[str] | None = None,
    *,
    normalize: bool = True,
) -> pd.DataFrame:
    """2-D PCA without centring of two texts' token states and their means (paper Figure 1).

    The stacked (normalised) tokens ``[X1; X2]`` of shape ``(n1 + n2, d)`` are factored by SVD
    without subtracting a mean; tokens and both mean-pooled embeddings are projected onto the top-2
    right singular vectors (each axis signed so that the sum of the two means' coordinates is >= 0).

    Args:
        x1, x2: token states, shapes ``(n1, d)`` and ``(n2, d)``.
        tokens1, tokens2: optional token strings (lengths ``n1`` and ``n2``); both or neither.
        normalize: scale each text to a unit-norm mean first (as SOCM does).

    Returns:
        DataFrame with ``n1 + n2 + 2`` rows: ``text`` (0/1), ``kind`` ("token"/"mean"), ``position``
        (token index; -1 for means), ``x``, ``y`` and, with token strings, ``token`` ("" for means).
        ``df.attrs["explained"]`` is the share of the squared singular values on the two axes.
    """
    t1, t2 = token_matrix(x1, "x1").cpu(), token_matrix(x2, "x2").cpu()
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    if t1.shape[1] < 2:
        raise ValueError("token_view needs dimension >= 2")
    if (tokens1 is None) != (tokens2 is None):
        raise ValueError("give both tokens1 and tokens2, or neither")
    if tokens1 is not None and (len(tokens1) != t1.shape[0] or len(tokens2) != t2.shape[0]):
        raise ValueError(
            f"token strings do not match the states: {len(tokens1)}/{len(tokens2)} strings for "
            f"{t1.shape[0]}/{t2.shape[0]} rows"
        )
    a = (normalize_tokens(t1) if normalize else t1).to(torch.float64)
    b = (normalize_tokens(t2) if normalize else t2).to(torch.float64)
    stacked = torch.cat([a, b])
    _, s, vh = torch.linalg.svd(stacked, full_matrices=False)
    axes = vh[:2].T  # (d, 2)
    if axes.shape[1] < 2:
        axes = torch.cat([axes, torch.zeros((axes.shape[0], 2 - axes.shape[1]), dtype=axes.dtype)], dim=1)
    means = torch.stack([a.mean(dim=0), b.mean(dim=0)])
    sign = torch.where((means @ axes).sum(dim=0) < 0, -1.0, 1.0).to(torch.float64)
    axes = axes * sign
    pts = (torch.cat([a, b, means]) @ axes).numpy()
    n1, n2 = a.shape[0], b.shape[0]
    df = pd.DataFrame(
        {
            "text": np.concatenate([np.zeros(n1), np.ones(n2), [0, 1]]).astype(np.int64),
            "kind": ["token"] * (n1 + n2) + ["mean", "mean"],
            "position": np.concatenate([np.arange(n1), np.arange(n2), [-1, -1]]).astype(np.int64),
            "x": pts[:, 0],
            "y": pts[:, 1],
        }
    )
    if tokens1 is not None:
        df["token"] = [str(t) for t in tokens1] + [str(t) for t in tokens2] + ["", ""]
    energy = float((s**2).sum())
    df.attrs["explained"] = float((s[:2] ** 2).sum()) / energy if energy > 0 else 0.0
    return df


def normalized_trace(tokens: Sequence[ArrayLike]) -> np.ndarray:
    """``tr Sigma(X_norm)`` per text: ``mean_j ||x_j||^2 / ||mu(X)||^2 - 1`` (= ``S(X)/||mu(X)||^2``).

    Args:
        tokens: ``T`` matrices of shape ``(n_t, d)``.

    Returns:
        float64 array ``(T,)``.
    """
    mats = _token_list(tokens)
    out = np.empty(len(mats))
    for k, x in enumerate(mats):
        x = x.to(torch.float64)
        mu2 = float((x.mean(dim=0) ** 2).sum())
        if not mu2 > 0:
            raise ValueError(f"tokens[{k}] has a zero mean token state: cannot normalise")
        out[k] = float((x * x).sum(dim=1).mean()) / mu2 - 1.0
    return np.clip(out, 0.0, None)


def _token_list(tokens: Sequence[ArrayLike]) -> list[torch.Tensor]:
    if isinstance(tokens, np.ndarray | torch.Tensor) and getattr(tokens, "ndim", 0) == 2:
        raise ValueError("tokens must be a sequence of (n_i, d) matrices, one per text, not a single matrix")
    mats = [token_matrix(x, f"tokens[{k}]") for k, x in enumerate(tokens)]
    if not mats:
        raise ValueError("tokens is empty")
    return mats
