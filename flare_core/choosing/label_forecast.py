"""How many more labels would settle the choice: the futures the accuracy posterior
(:mod:`flare_core.choosing.accuracy_posterior`) foresees after n more labels, and the few-label frame with
what the stopping advice reads beside the estimates (the margins, the spread of the gaps, the forecast).

Shapes: M candidates, k labelled texts, D draws, F futures, S steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flare_core.choosing.accuracy_posterior import (
    SPREAD_INFLATION,
    AccuracyPrior,
    estimate_frame,
    label_error,
    posterior,
    posterior_update,
)

#: The forecast of labels that would settle the choice looks this far ahead, in steps of this many.
MAX_FORECAST, FORECAST_STEP = 256, 16
#: "n more labels would settle it": the fewest n after which the choice is settled in at least this share
#: of the futures the posterior foresees (:func:`forecast`), each future drawn with :data:`FUTURE_DRAWS`
#: draws of its own posterior. Chosen on the answer benchmark (``bench/studies/few_label_prior.py``, 15
#: classification corpora, 4 draws, forecasts at 16, 32 and 64 labels, checked with the same draw's next
#: labels): at 0.6 it named an n in 49 draws and n more settled 24% of them; at 0.8, 11 and 45%; at 0.9,
#: 5 and 60%. The forecast that kept today's estimate fixed named one in 86 draws, 31% came true. The
#: futures come true less often than the posterior foresees because a probe on more labels is not the
#: same probe measured longer: models that learn late gain on the others. So it names an n only when
#: nearly every future settles, and otherwise says the models are too close to tell.
FORECAST_CHANCE = 0.9
FUTURES, FUTURE_DRAWS = 200, 500


def forecast(
    prior: AccuracyPrior,
    correct: np.ndarray | None,
    *,
    tolerance_points: float,
    sure: float,
    step: int,
    most: int,
    seed: int = 0,
    chance: float | None = None,
    classes: int = 2,
) -> int | None:
    """The fewest more labels (a multiple of ``step``, at most ``most``) after which the choice would be
    settled (its leader within ``tolerance_points`` of the best with chance ``sure``) in at least
    ``chance`` (default :data:`FORECAST_CHANCE`) of the futures the posterior foresees
    (:func:`settled_shares`). None when even ``most`` more would not settle it."""
    chance = FORECAST_CHANCE if chance is None else chance
    steps, shares = settled_shares(
        prior,
        correct,
        tolerance_points=tolerance_points,
        sure=sure,
        step=step,
        most=most,
        seed=seed,
        classes=classes,
        stop_at=chance,
    )
    reached = np.flatnonzero(shares >= chance)
    return int(steps[reached[0]]) if reached.size else None


def settled_shares(
    prior: AccuracyPrior,
    correct: np.ndarray | None,
    *,
    tolerance_points: float,
    sure: float,
    step: int,
    most: int,
    seed: int = 0,
    classes: int = 2,
    stop_at: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """For n = ``step``, 2 ``step``, … ``most`` more labels (S,), the share (S,) of the futures the
    posterior foresees in which the choice is settled after them (its leader within ``tolerance_points``
    of the best with chance ``sure``); the steps stop once a share reaches ``stop_at``.

    A future is what n more labels would show: the accuracies are drawn from today's posterior and the
    labels from them, so the posterior mean after them varies around today's as ``N(μ, Q − Qₙ)`` (``Q``
    today's covariance, ``Qₙ`` the one after n more, which no label value changes); each future's chance
    of being settled is read from :data:`FUTURE_DRAWS` draws of ``N(μₙ, Qₙ)``, its own leader. Without
    labels, the per-text spread is Jeffreys'. ``classes``: the labels' classes (what the reading reads them
    by)."""
    k = 0 if correct is None else correct.shape[0]
    scores = correct if k else np.full((1, len(prior.models)), 0.5)
    mean, today = posterior(prior, correct, classes)
    m0, p = prior.level_mean + prior.mean, prior.covariance()
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((FUTURE_DRAWS, mean.shape[0]))
    ahead = rng.standard_normal((FUTURES, mean.shape[0]))
    steps, shares = [], []
    for more in range(step, most + step, step):
        r = label_error(scores, k + more, reading=prior.reading, classes=classes)
        _, later = posterior_update(m0, p, mean, r)
        futures = mean + ahead @ _root(today - later).T  # (F, M): each future's posterior mean
        samples = futures[:, None, :] + (noise @ _root(later).T)[None]  # (F, D, M)
        leader = np.argmax(futures, axis=1)
        gap = samples.max(axis=2) - np.take_along_axis(samples, leader[:, None, None], axis=2)[..., 0]
        settled = (100.0 * gap <= tolerance_points + 1e-9).mean(axis=1) >= sure
        steps.append(more)
        shares.append(float(settled.mean()))
        if stop_at is not None and shares[-1] >= stop_at:
            break
    return np.asarray(steps, dtype=int), np.asarray(shares)


def _root(cov: np.ndarray) -> np.ndarray:
    """A square root ``L`` (M, M) of the symmetric positive semi-definite ``cov``: ``L Lᵀ = cov``."""
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def labelled_frame(
    prior: AccuracyPrior,
    correct: np.ndarray,
    margin: np.ndarray,
    *,
    tolerance_points: float,
    sure: float,
    n_classes: int,
    seed: int = 0,
    named_before: str | None = None,
) -> pd.DataFrame:
    """:func:`estimate_frame` (with ``named_before``) for ``k`` labelled texts of ``n_classes`` classes
    (guessing: 1 / classes), with what the stopping advice reads beside it: ``margin`` (each model's mean
    leave-one-out margin, from ``margin`` (k, M)), ``diff_sd`` (the per-text spread of the named model's
    score minus its own, scaled as the labels' sampling error is) and
    ``attrs["more_labels"]`` (:func:`forecast` with ``sure``) and ``attrs["tolerance_points"]``."""
    frame = estimate_frame(
        prior,
        correct,
        tolerance_points=tolerance_points,
        chance_level=1.0 / max(n_classes, 1),
        seed=seed,
        named_before=named_before,
        classes=n_classes,
    )
    at = [prior.models.index(m) for m in frame["model"]]
    paired = correct[:, [at[0]]] - correct
    spread = paired.std(axis=0, ddof=1) if correct.shape[0] > 1 else np.zeros(len(at))
    scale = SPREAD_INFLATION if prior.reading is None else prior.reading.scale
    frame["margin"] = margin.mean(axis=0)[at]
    frame["diff_sd"] = scale * spread[at]
    frame.attrs.update(
        tolerance_points=float(tolerance_points),
        prior=prior.source,
        more_labels=forecast(
            prior,
            correct,
            tolerance_points=tolerance_points,
            sure=sure,
            step=FORECAST_STEP,
            most=MAX_FORECAST,
            seed=seed,
            classes=n_classes,
        ),
    )
    return frame
