"""Choosing a model from labels: linear probes on stored embeddings, compared honestly.

- :func:`compare_with_labels`: every text labelled. Cross-validated logistic regression on
  L2-normalised embeddings, the regularisation chosen inside each training fold, the reported accuracy
  from the test folds, and a paired interval of each model's gap to the best on the same folds.
- :func:`few_label_estimates`: k labelled texts. Each model's expected accuracy once the user has
  plenty of labels, with an interval and the chance that it is the best.
- the stopping advice built on those estimates is :mod:`flare_core.choosing.stopping`.

``embeddings`` maps a model name to its (N, d) matrix of the same N texts, in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedShuffleSplit
from threadpoolctl import threadpool_limits

from flare_core.checks import check_labels, check_matrix
from flare_core.choosing import label_forecast, label_scores
from flare_core.choosing.accuracy_posterior import AccuracyPrior
from flare_core.choosing.label_scores import cv_correct, fit_predict, unit_rows
from flare_core.choosing.label_scores import folds as make_folds

#: Regularisation strengths of the logistic-regression probe, chosen among inside the training folds.
C_GRID = (0.1, 1.0, 10.0)
#: Outer folds and repeats of :func:`compare_with_labels`.
FOLDS, REPEATS = 5, 2
#: A class counts as balanced when its smallest class has at least this share of the largest.
BALANCE_RATIO = 0.5
#: The tolerances of "good enough" a person may choose, in points, and the product's default.
TOLERANCES, DEFAULT_TOLERANCE = (1.0, 2.0, 5.0), 2.0
#: The chance at which a statement about a model is made: "within the tolerance of the best" (good
#: enough, and the stopping advice's "settled") needs at least this chance.
SURE = 0.9


# ----------------------------------------------------------------------------------------------------
# validation


def check_embeddings(embeddings: Mapping[str, Any], n_rows: int | None = None) -> dict[str, np.ndarray]:
    """Every model's (N, d) matrix as float64, all with the same N (``n_rows`` when given)."""
    if not isinstance(embeddings, Mapping) or not embeddings:
        raise ValueError("embeddings must be a non-empty mapping {model name: (N, d) array}")
    out = {}
    for name, x in embeddings.items():
        arr = check_matrix(x, f"embeddings[{name!r}]")
        if n_rows is None:
            n_rows = arr.shape[0]
        if arr.shape[0] != n_rows:
            raise ValueError(
                f"embeddings[{name!r}] has {arr.shape[0]} rows but the other models have {n_rows}: "
                "every model must embed the same texts"
            )
        out[str(name)] = arr
    return out


def check_rows(rows: Any, n_texts: int, name: str = "rows") -> np.ndarray:
    """Distinct integer row positions in ``[0, n_texts)`` as an int64 vector."""
    arr = np.asarray(rows)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a one-dimensional array of integer row positions, got {arr!r}")
    bad = arr[(arr < 0) | (arr >= n_texts)]
    if bad.size:
        raise ValueError(
            f"{name} holds {bad.size} row(s) outside the corpus of {n_texts} texts: {bad[:5].tolist()}"
        )
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} holds the same row more than once")
    return arr.astype(np.int64)


def _class_codes(labels: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (n,) and the class values, with a clear message for fewer than 2 classes."""
    codes = check_labels(labels, n)
    values = np.unique(np.asarray(labels).astype(str))
    if values.size < 2:
        raise ValueError(
            f"labels name only one class ({str(values[0])!r}): a choice between models needs at least two "
            "classes"
            if values.size
            else "labels are empty: label at least two texts of two different classes"
        )
    return codes, values


# ----------------------------------------------------------------------------------------------------
# computation


def _inner_choice(x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """The C of :data:`C_GRID` with the best accuracy on a held-out third of ``x`` (n, d), ``y`` (n,)
    (one stratified split: the training fold alone decides, at a third of a 3-fold check's cost)."""
    classes = np.unique(y)
    if np.bincount(y)[classes].min() < 2 or len(y) // 3 < classes.size:
        return 1.0  # too few texts to hold a third out with every class in it: the default C
    split = StratifiedShuffleSplit(1, test_size=1 / 3, random_state=seed)
    train, test = next(split.split(x, y))
    if np.unique(y[train]).size < np.unique(y).size:
        return 1.0
    scores = [np.mean(fit_predict(x[train], y[train], x[test], c) == y[test]) for c in C_GRID]
    return float(C_GRID[int(np.argmax(scores))])


def _nested_predictions(x: np.ndarray, y: np.ndarray, folds: list, seed: int) -> np.ndarray:
    """Out-of-fold predictions (n,) with C chosen inside each training fold."""
    pred = np.empty_like(y)
    for train, test in folds:
        c = _inner_choice(x[train], y[train], seed)
        pred[test] = fit_predict(x[train], y[train], x[test], c)
    return pred


def _corrected_interval(diffs: np.ndarray, test_share: float) -> tuple[float, float]:
    """95% interval of the mean of per-fold differences ``diffs`` (J,) by the corrected resampled t-test
    (Nadeau & Bengio 2003): variance × (1/J + n_test/n_train)."""
    j = diffs.shape[0]
    mean = float(diffs.mean())
    if j < 2:
        return mean, mean
    var = float(diffs.var(ddof=1)) * (1.0 / j + test_share / (1.0 - test_share))
    half = float(stats.t.ppf(0.975, j - 1)) * np.sqrt(var)
    return mean - half, mean + half


# ----------------------------------------------------------------------------------------------------
# full labels


def compare_with_labels(
    embeddings: Mapping[str, np.ndarray], labels: Sequence, *, seed: int = 0
) -> pd.DataFrame:
    """Rank models by cross-validated probe accuracy on fully labelled texts.

    ``embeddings[m]`` is (N, d); ``labels`` (N,). Logistic regression on L2-normalised rows; C is chosen
    from :data:`C_GRID` on a held-out third of each training fold; accuracy and macro-F1 come from the
    outer test folds (``FOLDS`` stratified folds, ``REPEATS`` seeded repeats). The gap of each model to the
    best, in accuracy points, has a 95% interval from the per-fold paired differences (corrected
    resampled t-test); a model is ``tied`` with the best when its interval includes 0.

    Returns one row per model, best first: ``model, accuracy, f1_macro, gap, gap_low, gap_high, tied,
    n_labels, n_classes``; ``attrs``: ``best``, ``balanced``, ``method``, ``folds``, ``repeats``.
    Raises ``ValueError`` for fewer than two classes of two or more texts.
    """
    xs = check_embeddings(embeddings)
    n = next(iter(xs.values())).shape[0]
    codes, values = _class_codes(labels, n)
    counts = np.bincount(codes)
    if counts.min() < 2:
        raise ValueError(
            f"every class needs at least 2 labelled texts to be both trained on and tested; "
            f"{', '.join(repr(str(values[i])) for i in np.flatnonzero(counts < 2))} has 1"
        )
    n_splits = int(min(FOLDS, counts.min()))
    splits = [make_folds(codes, n_splits, seed + r) for r in range(REPEATS)]
    tests = [test for folds in splits for _, test in folds]
    per_fold, accuracy, f1 = {}, {}, {}
    # The probes' matrices are small (a fold's texts by the model's width): a second BLAS thread only waits,
    # and on a busy machine its waiting cost 15 s of CPU where one thread needs 1 s (4 models, 50 texts).
    with threadpool_limits(limits=1, user_api="blas"):
        for name, x in xs.items():
            unit = unit_rows(x)
            preds = [_nested_predictions(unit, codes, folds, seed) for folds in splits]
            per_fold[name] = np.array(
                [
                    np.mean(preds[r][test] == codes[test])
                    for r, folds in enumerate(splits)
                    for _, test in folds
                ]
            )
            accuracy[name] = float(np.mean([np.mean(p == codes) for p in preds]))
            f1[name] = float(np.mean([f1_score(codes, p, average="macro") for p in preds]))
    best = min(accuracy, key=lambda m: (-accuracy[m], m))
    rows = []
    for name in xs:
        low, high = _corrected_interval(100.0 * (per_fold[best] - per_fold[name]), len(tests[0]) / n)
        gap = 100.0 * (accuracy[best] - accuracy[name])
        tied = name != best and low <= 0.0
        rows.append((name, accuracy[name], f1[name], gap, low, high, tied))
    frame = pd.DataFrame(
        rows, columns=["model", "accuracy", "f1_macro", "gap", "gap_low", "gap_high", "tied"]
    )
    frame = frame.assign(n_labels=n, n_classes=int(values.size))
    frame = frame.sort_values(["accuracy", "model"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )
    frame.attrs.update(
        best=best,
        balanced=bool(counts.min() >= BALANCE_RATIO * counts.max()),
        method="logistic regression on L2-normalised embeddings, C chosen inside each training fold",
        folds=n_splits,
        repeats=REPEATS,
    )
    return frame


# ----------------------------------------------------------------------------------------------------
# few labels


def _few_label_inputs(
    embeddings: Mapping[str, np.ndarray], rows: Any, labels: Sequence
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Checked embeddings, labelled rows (k,), their class codes (k,) and the class values."""
    xs = check_embeddings(embeddings)
    n = next(iter(xs.values())).shape[0]
    rows = check_rows(rows, n)
    if len(labels) != rows.shape[0]:
        raise ValueError(f"labels has {len(labels)} entries but rows has {rows.shape[0]}: one label per row")
    codes, values = _class_codes(labels, rows.shape[0])
    return xs, rows, codes, values


#: The leave-one-out probes whose per-text margins the product's choice averages.
PRODUCT_PROBES = ("ridge",)
#: The ridge probe's penalty on L2-normalised rows.
RIDGE_PENALTY = 1.0
PROBES = ("cv-lr", "ridge", "knn", "propagation")


def probe_scores(
    xs: Mapping[str, np.ndarray], rows: np.ndarray, codes: np.ndarray, probe: str, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Correctness and margin (both (k, M)) of one probe on each labelled row, the row left out of its
    own prediction; the margin is the true class's score minus the best other class's, in [-1, 1].

    ``xs[m]`` is (N, d); ``rows`` (k,) the labelled rows, ``codes`` (k,) their classes. Probes:
    ``"cv-lr"`` (5-fold logistic regression; its margin is ±1), ``"ridge"`` (closed-form leave-one-out
    ridge on one-hot targets, penalty :data:`RIDGE_PENALTY`), ``"knn"`` (5 nearest labelled
    neighbours' weighted vote), ``"propagation"`` (label spreading over all N texts' 10-nearest-neighbour
    graph, which is how the unlabelled texts take part)."""
    if probe not in PROBES:
        raise ValueError(f"unknown probe {probe!r}; choose from {PROBES}")
    correct, margin = [], []
    # the kernels are small (k by k, k the labels): a second BLAS thread only waits; on a busy 2-core machine
    # one 128-text eigendecomposition took 0.66 s on two threads and 0.07 s on one
    with threadpool_limits(limits=1, user_api="blas"):
        for x in xs.values():
            unit = unit_rows(x[rows])
            if probe == "cv-lr":
                hits = cv_correct(unit, codes, seed=seed)
                correct.append(hits)
                margin.append(2.0 * hits - 1.0)
                continue
            if probe == "ridge":
                shares = label_scores.ridge_loo_scores(unit, codes, RIDGE_PENALTY)
            elif probe == "knn":
                shares = label_scores.knn_loo_scores(unit, codes)
            else:
                shares = label_scores.propagation_loo_scores(label_scores.cached_knn_graph(x), rows, codes)
            correct.append(shares.argmax(axis=1) == codes)
            margin.append(label_scores.margins(shares, codes))
    return np.stack(correct, axis=1).astype(np.float64), np.stack(margin, axis=1)


def few_label_estimates(
    embeddings: Mapping[str, np.ndarray],
    rows: np.ndarray,
    labels: Sequence,
    *,
    seed: int = 0,
    prior: AccuracyPrior | None = None,
    tolerance_points: float = DEFAULT_TOLERANCE,
    named_before: str | None = None,
    classes: int | None = None,
) -> pd.DataFrame:
    """Each model's expected accuracy once plenty of texts are labelled, from ``k`` labelled rows: one
    posterior (:func:`~flare_core.choosing.label_forecast.labelled_frame`), from which every figure of
    the few-label answer comes.

    ``embeddings[m]`` is (N, d) for all N texts; ``labels[i]`` labels text ``rows[i]`` (k of them). Each
    labelled text is classified by the probes of :data:`PRODUCT_PROBES` trained on the other k - 1 (closed
    form, no refit); that per-text matrix (k, M) updates ``prior`` (what was known before the labels,
    with its reading of what k labels can show; every model alike and the sampling error widened when
    None). Columns: ``estimate`` (posterior mean), ``ci_low``, ``ci_high`` (95%), ``p_best``, ``p_within``
    (within ``tolerance_points`` of the best), ``gap``, ``gap_high``, ``prior_mean``, ``margin`` (the mean
    leave-one-out margin) and ``diff_sd``; the model named before the last labels (``named_before``) first
    unless they displace it, then best first. ``classes`` (default: those labelled) is the number of
    classes the labels are of, as the reading reads them (labels per class). ``attrs``: ``method``,
    ``n_labels``, ``n_texts``, ``n_classes``, ``n_classes_repeated``, ``prior``, ``tolerance_points`` and
    ``more_labels`` (the posterior's forecast). Works with a single label in a class and with many classes
    of a few labels each. Raises ``ValueError`` for unknown or repeated rows, a label count that does not
    match, or fewer than two classes."""
    tolerance_points = check_tolerance(tolerance_points)
    xs, rows, codes, values = _few_label_inputs(embeddings, rows, labels)
    names = list(xs)
    parts = [probe_scores(xs, rows, codes, probe, seed) for probe in PRODUCT_PROBES]
    correct = np.mean([c for c, _ in parts], axis=0)
    margin = np.mean([m for _, m in parts], axis=0)
    prior = AccuracyPrior.flat(names) if prior is None else prior.reordered(names)
    with threadpool_limits(limits=1, user_api="blas"):  # M by M matrices: one thread is faster
        frame = label_forecast.labelled_frame(
            prior,
            correct,
            margin,
            tolerance_points=tolerance_points,
            sure=SURE,
            n_classes=max(int(values.size), int(classes or 0)),
            seed=seed,
            named_before=named_before,
        )
    method = "leave-one-out " + ", ".join(PRODUCT_PROBES) + " probe(s), updating " + prior.source
    frame.attrs.update(_counts(rows, xs, values, codes), method=method)
    return frame


def _counts(rows: np.ndarray, xs: Mapping[str, np.ndarray], values: np.ndarray, codes: np.ndarray) -> dict:
    """The counts a few-label frame carries in its ``attrs``."""
    return {
        "n_labels": int(rows.shape[0]),
        "n_texts": int(next(iter(xs.values())).shape[0]),
        "n_classes": int(values.size),
        "n_classes_repeated": int((np.bincount(codes) >= 2).sum()),
    }


def check_tolerance(points: float) -> float:
    """``points`` as a float when it is a positive, finite tolerance in accuracy points."""
    value = float(points)
    if not np.isfinite(value) or value <= 0 or value > 50:
        raise ValueError(f"the tolerance for 'good enough' must be between 0 and 50 points, got {points!r}")
    return value
