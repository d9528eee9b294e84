"""Choosing a model from labels: linear probes on stored embeddings, compared honestly.

- :func:`compare_with_labels`: every text labelled. Cross-validated logistic regression on
  L2-normalised embeddings, the regularisation chosen inside each training fold, the reported accuracy
  from the test folds, and a paired interval of each model's gap to the best on the same folds.
- :func:`few_label_estimates`: k labelled texts. Each model's expected accuracy once the user has
  plenty of labels, with an interval and the chance that it is the best.
- :func:`stopping_advice`: whether those chances settle the question, in one sentence.

``embeddings`` maps a model name to its (N, d) matrix of the same N texts, in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold

from flare_core.analyses.label_scores import cv_correct, fit_predict, unit_rows
from flare_core.analyses.label_scores import folds as make_folds
from flare_core.checks import check_int, check_labels, check_matrix

#: Regularisation strengths of the logistic-regression probe, chosen among inside the training folds.
C_GRID = (0.1, 1.0, 10.0)
#: Outer folds and repeats of :func:`compare_with_labels`.
FOLDS, REPEATS = 5, 2
#: A class counts as balanced when its smallest class has at least this share of the largest.
BALANCE_RATIO = 0.5
#: Draws of the bootstrap behind the few-label chances.
BOOTSTRAP_DRAWS = 2000


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
            f"labels name only one class ({str(values[0])!r}): a choice between models needs at least two classes"
            if values.size
            else "labels are empty: label at least two texts of two different classes"
        )
    return codes, values


# ----------------------------------------------------------------------------------------------------
# computation


def _inner_choice(x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """The C of :data:`C_GRID` with the best 3-fold accuracy on ``x`` (n, d), ``y`` (n,) alone."""
    n_splits = int(min(3, np.bincount(y)[np.unique(y)].min()))
    if n_splits < 2:
        return 1.0
    folds = list(StratifiedKFold(n_splits, shuffle=True, random_state=seed).split(x, y))
    scores = [
        np.mean([np.mean(fit_predict(x[tr], y[tr], x[te], c) == y[te]) for tr, te in folds]) for c in C_GRID
    ]
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
    from :data:`C_GRID` by a 3-fold check inside each training fold; accuracy and macro-F1 come from the
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
    for name, x in xs.items():
        unit = unit_rows(x)
        preds = [_nested_predictions(unit, codes, folds, seed) for folds in splits]
        per_fold[name] = np.array(
            [np.mean(preds[r][test] == codes[test]) for r, folds in enumerate(splits) for _, test in folds]
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


def _p_best(scores: np.ndarray, seed: int, draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """Chance (M,) that each model is best: a paired bootstrap over the rows of ``scores`` (k, M), ties
    shared equally."""
    rng = np.random.default_rng(seed)
    k, m = scores.shape
    sample = rng.integers(0, k, size=(draws, k))
    means = scores[sample].mean(axis=1)  # (draws, M)
    top = means >= means.max(axis=1, keepdims=True) - 1e-12
    return (top / top.sum(axis=1, keepdims=True)).mean(axis=0)


def few_label_estimates(
    embeddings: Mapping[str, np.ndarray], rows: np.ndarray, labels: Sequence, *, seed: int = 0
) -> pd.DataFrame:
    """Each model's expected accuracy once plenty of texts are labelled, from ``k`` labelled rows.

    ``embeddings[m]`` is (N, d) for all N texts; ``labels[i]`` labels text ``rows[i]`` (k of them).
    Returns one row per model, best estimate first: ``model, estimate`` (0..1), ``ci_low, ci_high`` (95%),
    ``p_best`` (chance it is the best; the column sums to 1); ``attrs``: ``method``, ``n_labels``,
    ``n_classes``. Works with a single label in a class. Raises ``ValueError`` for unknown or repeated
    rows, a label count that does not match, or fewer than two classes.
    """
    xs, rows, codes, values = _few_label_inputs(embeddings, rows, labels)
    names = list(xs)
    correct = np.stack([cv_correct(unit_rows(xs[m][rows]), codes, seed=seed) for m in names], axis=1)
    k = correct.shape[0]
    hits = correct.sum(axis=0)
    # Jeffreys interval, closed at 0 and 1 when every label was missed or hit
    low = np.where(hits == 0, 0.0, stats.beta.ppf(0.025, hits + 0.5, k - hits + 0.5))
    high = np.where(hits == k, 1.0, stats.beta.ppf(0.975, hits + 0.5, k - hits + 0.5))
    frame = pd.DataFrame(
        {
            "model": names,
            "estimate": hits / k,
            "ci_low": low,
            "ci_high": high,
            "p_best": _p_best(correct.astype(np.float64), seed),
        }
    )
    frame = frame.sort_values(["estimate", "p_best"], ascending=False, kind="stable").reset_index(drop=True)
    frame.attrs.update(method="cv-lr", n_labels=int(k), n_classes=int(values.size))
    return frame


# ----------------------------------------------------------------------------------------------------
# stopping advice

#: The chance of being best at which the question counts as settled.
SETTLED_P = 0.9
#: Models whose estimate is within this many points of the best "will do".
EITHER_POINTS = 1.0


def stopping_advice(estimates: pd.DataFrame, n_labels: int) -> dict[str, Any]:
    """Whether ``estimates`` (a :func:`few_label_estimates` frame) settle the choice after ``n_labels``.

    Returns ``{"settled", "best", "either", "more_labels", "text"}``: ``either`` lists the models that
    will do (the best and those within :data:`EITHER_POINTS` of it); ``more_labels`` is how many more
    labels to ask for (None when settled); ``text`` says it in one sentence.
    """
    n_labels = check_int(n_labels, "n_labels", min_value=0)
    missing = {"model", "estimate", "p_best"} - set(getattr(estimates, "columns", ()))
    if missing or len(estimates) == 0:
        raise ValueError(f"estimates must be a few_label_estimates frame; missing columns {sorted(missing)}")
    ranked = estimates.sort_values("p_best", ascending=False, kind="stable")
    best, p = str(ranked["model"].iloc[0]), float(ranked["p_best"].iloc[0])
    top = float(estimates.loc[estimates["model"] == best, "estimate"].iloc[0])
    close = estimates[estimates["estimate"] >= top - EITHER_POINTS / 100.0]["model"].astype(str).tolist()
    either = [best] + [m for m in close if m != best]
    if p >= SETTLED_P:
        return _advice(True, best, either, None, f"{best} is best with {p:.0%} probability.")
    if len(either) > 1 and float(ranked["p_best"].iloc[: len(either)].sum()) >= SETTLED_P:
        text = (
            f"The top {len(either)} are within {EITHER_POINTS:g} point: either will do ({', '.join(either)})."
        )
        return _advice(True, best, either, None, text)
    more = max(8, n_labels)
    text = f"{best} is best with {p:.0%} probability; {more} more labels would settle it."
    return _advice(False, best, either, more, text)


def _advice(settled: bool, best: str, either: list[str], more: int | None, text: str) -> dict[str, Any]:
    return {"settled": settled, "best": best, "either": either, "more_labels": more, "text": text}
