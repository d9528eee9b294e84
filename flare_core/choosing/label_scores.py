"""Scores of one model's embeddings from a few labelled texts: how well a probe trained on them does.

Each function takes the labelled rows ``x`` (k, d) of one model and their integer class codes ``y`` (k,);
each row is predicted without itself (leave-one-out, or out-of-fold for the logistic regression):

- :func:`cv_correct`: out-of-fold correctness of a logistic-regression probe (k,);
- :func:`ridge_loo_scores` / :func:`ridge_loo_correct`: a ridge classifier on one-hot targets, in closed
  form from one eigendecomposition of the k × k kernel (no refit per row);
- :func:`knn_loo_scores` / :func:`knn_loo_correct`: a similarity-weighted vote of the nearest labelled rows;
- :func:`propagation_loo_scores`: label spreading over the nearest-neighbour graph of all N texts
  (:func:`knn_graph`, cached per embedding by :func:`cached_knn_graph`): the unlabelled texts take part;
- :func:`logme`: LogME (You et al., ICML 2021), the log evidence of a Bayesian linear model per text;
- :func:`margins`: a soft correctness from class scores (true class minus the best other).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold

#: LogME's fixed-point iteration stops when alpha/beta moves by less than this share.
LOGME_TOL = 1e-3
LOGME_MAX_ITER = 100


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (n, d) scaled to unit L2 norm (all-zero rows stay zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def folds(y: np.ndarray, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified folds of ``y`` (k,) where every class has ``n_splits`` members, else shuffled folds."""
    if np.bincount(y)[np.unique(y)].min() >= n_splits:
        return list(StratifiedKFold(n_splits, shuffle=True, random_state=seed).split(y, y))
    return list(KFold(n_splits, shuffle=True, random_state=seed).split(y))


def fit_predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, c: float) -> np.ndarray:
    """Labels predicted for ``test_x`` (m, d) by a logistic regression fitted on the training rows; the
    one class seen when the training rows hold only one."""
    if np.unique(train_y).size < 2:
        return np.full(test_x.shape[0], train_y[0])
    return LogisticRegression(C=c, max_iter=1000).fit(train_x, train_y).predict(test_x)


def cv_correct(
    x: np.ndarray, y: np.ndarray, *, c: float = 1.0, n_splits: int = 5, seed: int = 0
) -> np.ndarray:
    """Out-of-fold correctness (k,) of a logistic regression (``C = c``) on ``x`` (k, d): at most
    ``n_splits`` folds, stratified when every class allows it."""
    n_splits = int(min(n_splits, y.shape[0]))
    correct = np.zeros(y.shape[0], dtype=bool)
    for train, test in folds(y, n_splits, seed):
        correct[test] = fit_predict(x[train], y[train], x[test], c) == y[test]
    return correct


def knn_loo_scores(x: np.ndarray, y: np.ndarray, *, neighbours: int = 5) -> np.ndarray:
    """Leave-one-out vote shares (k, C): each row's ``neighbours`` most cosine-similar other labelled rows
    vote for their class, each vote weighted by 1 + cosine (so in [0, 2])."""
    unit = unit_rows(x)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    m = int(min(neighbours, y.shape[0] - 1))
    votes = np.zeros((y.shape[0], int(y.max()) + 1))
    if m < 1:
        return votes
    near = np.argpartition(-sims, m - 1, axis=1)[:, :m]
    weights = np.take_along_axis(sims, near, axis=1) + 1.0
    np.add.at(votes, (np.arange(y.shape[0])[:, None], y[near]), weights)
    return votes / np.maximum(votes.sum(axis=1, keepdims=True), 1e-300)


def knn_loo_correct(x: np.ndarray, y: np.ndarray, *, neighbours: int = 5) -> np.ndarray:
    """Leave-one-out correctness (k,) of the similarity-weighted vote of :func:`knn_loo_scores` (ties go
    to the lower class code; a row with no other labelled row counts as wrong)."""
    if y.shape[0] < 2:
        return np.zeros(y.shape[0], dtype=bool)
    return knn_loo_scores(x, y, neighbours=neighbours).argmax(axis=1) == y


def _logme_fit(u: np.ndarray, sigma: np.ndarray, d: int, target: np.ndarray) -> tuple[float, float, float]:
    """LogME's maximum evidence for ``target`` (n,) given the left singular vectors ``u`` (n, r) and the
    squared singular values ``sigma`` (r,) of the (n, d) features: ``(evidence / n, alpha, beta)``."""
    n = target.shape[0]
    proj = u.T @ target
    proj2 = proj**2
    outside = max(float(target @ target - proj2.sum()), 0.0)  # part of the target outside the span
    alpha, beta = 1.0, 1.0
    for _ in range(LOGME_MAX_ITER):
        t = alpha / beta
        gamma = float((sigma / (sigma + t)).sum())
        m2 = float((sigma * proj2 / (sigma + t) ** 2).sum())
        res2 = float((proj2 * (t / (sigma + t)) ** 2).sum()) + outside
        alpha = gamma / (m2 + 1e-5)
        beta = (n - gamma) / (res2 + 1e-5)
        if abs(alpha / beta - t) / t < LOGME_TOL:
            break
    t = alpha / beta
    m2 = float((sigma * proj2 / (sigma + t) ** 2).sum())
    res2 = float((proj2 * (t / (sigma + t)) ** 2).sum()) + outside
    log_det = float(np.log(alpha + beta * sigma).sum()) + (d - sigma.shape[0]) * np.log(alpha)
    evidence = (
        0.5 * d * np.log(alpha)
        + 0.5 * n * np.log(beta)
        - 0.5 * alpha * m2
        - 0.5 * beta * res2
        - 0.5 * log_det
        - 0.5 * n * np.log(2 * np.pi)
    )
    return float(evidence / n), float(alpha), float(beta)


def logme_evidence(f: np.ndarray, target: np.ndarray) -> tuple[float, float, float]:
    """Maximum log evidence of ``target`` (n,) under y = f w + noise, w ~ N(0, I/alpha), noise
    ~ N(0, 1/beta), with ``f`` (n, D): returns ``(evidence / n, alpha, beta)``.

    The fixed-point updates of alpha and beta are those of You et al. (2021, Algorithm 1), computed on
    the SVD of ``f`` so that D > n costs no more than n > D.
    """
    u, s, _ = np.linalg.svd(f, full_matrices=False)
    return _logme_fit(u, s**2, f.shape[1], target)


def logme(x: np.ndarray, y: np.ndarray) -> float:
    """LogME of ``x`` (k, d) for class codes ``y`` (k,): the mean over classes of the per-text log evidence
    of the class's one-hot column (You et al. 2021); one SVD serves every class."""
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    sigma = s**2
    return float(
        np.mean([_logme_fit(u, sigma, x.shape[1], (y == c).astype(np.float64))[0] for c in np.unique(y)])
    )


def ridge_loo_scores(x: np.ndarray, y: np.ndarray, penalty: float) -> np.ndarray:
    """Leave-one-out class scores (k, C) of a ridge classifier on one-hot targets (closed form, see
    :func:`ridge_loo_correct`)."""
    k = y.shape[0]
    onehot = np.eye(int(y.max()) + 1)[y]
    xc = x - x.mean(axis=0)
    lam, q = np.linalg.eigh(xc @ xc.T)
    shrink = np.maximum(lam, 0.0) / (np.maximum(lam, 0.0) + penalty)
    hat_diag = np.minimum((q**2) @ shrink + 1.0 / k, 1.0 - 1e-9)
    fitted = q @ (shrink[:, None] * (q.T @ (onehot - onehot.mean(axis=0)))) + onehot.mean(axis=0)
    return onehot - (onehot - fitted) / (1.0 - hat_diag)[:, None]


def ridge_loo_correct(
    x: np.ndarray, y: np.ndarray, *, penalties: tuple[float, ...] = (0.1, 1.0, 10.0)
) -> np.ndarray:
    """Leave-one-out correctness (k,) of a ridge classifier on one-hot targets, in closed form.

    With the centred kernel K = X Xᵀ (k, k) = Q Λ Qᵀ, the hat matrix of penalty λ is H = Q Λ/(Λ+λ) Qᵀ and
    the prediction for row i without it is (Ŷ_i − H_ii Y_i) / (1 − H_ii) (plus the class means). The
    penalty is the one with the most leave-one-out hits, the smallest on ties... this is a choice made on
    the same rows, so it is mildly optimistic.
    """
    k = y.shape[0]
    onehot = np.eye(int(y.max()) + 1)[y]
    xc = x - x.mean(axis=0)
    yc = onehot - onehot.mean(axis=0)
    lam, q = np.linalg.eigh(xc @ xc.T)
    lam = np.maximum(lam, 0.0)
    best = None
    for penalty in penalties:
        shrink = lam / (lam + penalty)
        hat_diag = np.minimum((q**2) @ shrink + 1.0 / k, 1.0 - 1e-9)
        fitted = q @ (shrink[:, None] * (q.T @ yc)) + onehot.mean(axis=0)
        loo = onehot - (onehot - fitted) / (1.0 - hat_diag)[:, None]
        correct = loo.argmax(axis=1) == y
        if best is None or correct.sum() > best.sum():
            best = correct
    return best


def knn_graph(x: np.ndarray, neighbours: int = 10) -> sparse.csr_matrix:
    """Symmetric normalised affinity D^-½ W D^-½ (N, N), sparse, of the cosine ``neighbours``-nearest-
    neighbour graph of all rows of ``x`` (N, d); W holds each kept cosine (clipped at 0)."""
    unit = unit_rows(x)
    n = x.shape[0]
    m = int(min(neighbours, n - 1))
    near = np.empty((n, m), dtype=np.int64)
    for start in range(0, n, 1024):  # blocks keep the similarity matrix at 1024 x N
        sims = unit[start : start + 1024] @ unit.T
        sims[np.arange(sims.shape[0]), np.arange(start, start + sims.shape[0])] = -np.inf
        near[start : start + 1024] = np.argpartition(-sims, m - 1, axis=1)[:, :m]
    weights = np.maximum(np.einsum("id,ijd->ij", unit, unit[near]), 0.0) + 1e-6
    w = sparse.csr_matrix((weights.ravel(), near.ravel(), np.arange(0, n * m + 1, m)), shape=(n, n))
    w = w.maximum(w.T)
    inv = 1.0 / np.sqrt(np.maximum(np.asarray(w.sum(axis=1)).ravel(), 1e-12))
    return sparse.diags(inv) @ w @ sparse.diags(inv)


#: Graphs kept between calls (a few models of one corpus), keyed by the embedding's content.
GRAPH_CACHE_SIZE = 32
_GRAPHS: OrderedDict[tuple, sparse.csr_matrix] = OrderedDict()


def cached_knn_graph(x: np.ndarray, neighbours: int = 10) -> sparse.csr_matrix:
    """:func:`knn_graph` of ``x`` (N, d), computed once per content: a batch of labels arrives every few
    seconds for the same embeddings, and the graph does not depend on the labels."""
    arr = np.ascontiguousarray(x)
    key = (
        arr.shape,
        str(arr.dtype),
        neighbours,
        hashlib.blake2b(arr.view(np.uint8), digest_size=16).hexdigest(),
    )
    if key in _GRAPHS:
        _GRAPHS.move_to_end(key)
        return _GRAPHS[key]
    graph = knn_graph(arr, neighbours)
    _GRAPHS[key] = graph
    while len(_GRAPHS) > GRAPH_CACHE_SIZE:
        _GRAPHS.popitem(last=False)
    return graph


def propagation_loo_scores(
    graph: sparse.spmatrix, rows: np.ndarray, y: np.ndarray, *, alpha: float = 0.9, steps: int = 20
) -> np.ndarray:
    """Leave-one-out class shares (k, C) of label spreading (Zhou et al. 2004) over ``graph`` (N, N) of
    all texts: the share of each class in what reaches each labelled row from the other ``k - 1``.

    The spread of every labelled row is computed once, Z = Σ_t αᵗ Sᵗ E_rows (``steps`` terms), so leaving
    a row out is dropping its own column. Classes are weighed by their share of the labels, so a frequent
    class does not win by its count."""
    seeds = np.zeros((graph.shape[0], rows.shape[0]))
    seeds[rows, np.arange(rows.shape[0])] = 1.0
    spread, term = seeds.copy(), seeds
    for _ in range(steps):
        term = alpha * (graph @ term)
        spread += term
    among = spread[rows]  # (k, k): how much labelled row j reaches labelled row i
    np.fill_diagonal(among, 0.0)
    onehot = np.eye(int(y.max()) + 1)[y]
    scores = (among @ onehot) / np.maximum(onehot.sum(axis=0), 1.0)
    return scores / np.maximum(scores.sum(axis=1, keepdims=True), 1e-300)


def propagation_loo_correct(graph: sparse.spmatrix, rows: np.ndarray, y: np.ndarray, **kwargs) -> np.ndarray:
    """Leave-one-out correctness (k,) of label spreading (:func:`propagation_loo_scores`)."""
    return propagation_loo_scores(graph, rows, y, **kwargs).argmax(axis=1) == y


def margins(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row of ``scores`` (k, C): the true class's score minus the best other class's, clipped to
    [-1, 1] (k,). A soft version of correctness: positive when right, larger when surely right."""
    rows = np.arange(y.shape[0])
    others = np.where(np.eye(scores.shape[1], dtype=bool)[y], -np.inf, scores).max(axis=1)
    return np.clip(scores[rows, y] - others, -1.0, 1.0)
