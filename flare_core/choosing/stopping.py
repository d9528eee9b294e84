"""Whether a person's few labels settle the choice of model: :func:`stopping_advice`, read from the one
posterior of :func:`~flare_core.choosing.probes.few_label_estimates`; for search judgements,
:func:`search_stopping_advice`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.choosing.label_forecast import MAX_FORECAST
from flare_core.choosing.probes import DEFAULT_TOLERANCE, SURE

#: No advice settles on fewer labels than this, or before two classes have two labels each (a text
#: alone in its class cannot be predicted without it, so such labels carry no evidence yet).
MIN_SETTLED_LABELS = 16


def chance_words(value: float) -> str:
    """A chance in the one format of every page and report: a whole percent, rounded down so that a chance
    shown as 90% has reached the 90% a statement needs ("89%" for 0.8995), and never read as certain:
    "over 99%" from 0.995, "under 1%" below 0.01."""
    value = float(value)
    if value >= 0.995:
        return "over 99%"
    if value < 0.01:
        return "under 1%"
    return f"{int(np.floor(100.0 * value + 1e-9))}%"


def stopping_advice(estimates: pd.DataFrame, n_labels: int) -> dict[str, Any]:
    """Whether ``estimates`` (a :func:`few_label_estimates` frame, the named model first) settle the choice
    after ``n_labels``, read from the same posterior as every other figure of the answer.

    Settled when the named model (the first row) is within the run's tolerance of the best
    (``attrs["tolerance_points"]``) with at least :data:`SURE` chance (``p_within``), once there are at
    least :data:`MIN_SETTLED_LABELS` labels and two classes of two labels or more. ``either`` lists every
    model that is within the tolerance with at least :data:`SURE` chance, the named one first (with a
    settled answer, any of them will do). Otherwise ``more_labels`` is the posterior's forecast
    (``attrs["more_labels"]``: the fewest more labels after which nearly every future it foresees is
    settled), None when even :data:`~flare_core.choosing.label_forecast.MAX_FORECAST` more would not
    settle it; with too few labels to judge by, the labels still needed to reach the minimum.

    Returns ``{"settled", "best", "either", "more_labels", "reason", "text"}``: ``reason`` is one of
    "sure", "few labels", "too close" (no forecast within reach) and "not sure yet"; ``text`` says it in
    words."""
    n_labels = check_int(n_labels, "n_labels", min_value=0)
    needed = {"model", "estimate", "p_best", "p_within", "gap", "ci_low"}
    missing = needed - set(getattr(estimates, "columns", ()))
    if missing or len(estimates) == 0:
        raise ValueError(f"estimates must be a few_label_estimates frame; missing columns {sorted(missing)}")
    best, p, sure, either = _leader(estimates)
    points = _points(float(estimates.attrs.get("tolerance_points", DEFAULT_TOLERANCE)))
    evidence = n_labels >= MIN_SETTLED_LABELS and estimates.attrs.get("n_classes_repeated", 2) >= 2
    if sure >= SURE and evidence:
        return _advice(
            True, best, either, None, "sure", _settled_text(best, either, points, sure, p, "labels")
        )
    leads = f"{best} leads ({chance_words(p)} chance of being best)"
    if not evidence:
        more = max(MIN_SETTLED_LABELS - n_labels, 0) or None
        ask = f"label at least {more} more texts" if more else "label texts of at least two categories twice"
        return _advice(
            False,
            best,
            either,
            more,
            "few labels",
            f"{leads}, but {n_labels} labels are too few to judge by; {ask}.",
        )
    more = estimates.attrs.get("more_labels")
    return _unsettled(leads, best, either, more, MAX_FORECAST, points, sure, "labels", "the labels")


def _leader(estimates: pd.DataFrame) -> tuple[str, float, float, list[str]]:
    """``(best, p_best, p_within, either)`` of an estimates frame whose first row is the named model:
    ``either`` is it and every other model within the tolerance with at least :data:`SURE` chance."""
    lead = estimates.iloc[0]
    best, p, sure = str(lead["model"]), float(lead["p_best"]), float(lead["p_within"])
    either = [best] + [
        str(m) for m, q in zip(estimates["model"][1:], estimates["p_within"][1:], strict=True) if q >= SURE
    ]
    return best, p, sure, either


def _unsettled(
    leads: str,
    best: str,
    either: list[str],
    more: float | None,
    cap: int,
    points: str,
    sure: float,
    noun: str,
    evidence: str,
) -> dict[str, Any]:
    """The advice when enough ``noun`` ("labels", "judged queries") count but the choice is not settled:
    "too close" when even ``cap`` more would not settle it (``more`` None), else "not sure yet" with the
    forecast ``more``; ``evidence`` names what is read ("the labels", "the judgements")."""
    if more is None:
        text = (
            f"{leads}; the models near the top are too close for {cap} more {noun} to tell whether it is "
            f"within {points} of the best ({chance_words(sure)} chance now). It is a sound choice as it "
            "stands."
        )
        return _advice(False, best, either, None, "too close", text)
    text = (
        f"{leads}, but {evidence} cannot yet tell whether it is within {points} of the best "
        f"({chance_words(sure)} chance); about {int(more)} more {noun} would settle it."
    )
    return _advice(False, best, either, int(more), "not sure yet", text)


def _points(tolerance: float, unit: str = "point") -> str:
    """ "2 points", "1 point", "1.5 points"."""
    return f"{tolerance:g} {unit}" + ("" if tolerance == 1 else "s")


def _settled_text(best: str, either: list[str], points: str, sure: float, p: float, more_of: str) -> str:
    """The settled advice in words: the models that each will do, or the one that is best."""
    if len(either) > 1:
        return (
            f"The top {len(either)} are each within {points} of the best with at least {SURE:.0%} "
            f"probability: either will do ({', '.join(either)})."
        )
    return (
        f"{best} is within {points} of the best with {chance_words(sure)} probability (best with "
        f"{chance_words(p)}); more {more_of} would hardly change the choice."
    )


def _advice(
    settled: bool, best: str, either: list[str], more: int | None, reason: str, text: str
) -> dict[str, Any]:
    return {
        "settled": settled,
        "best": best,
        "either": either,
        "more_labels": more,
        "reason": reason,
        "text": text,
    }


#: No advice on search judgements settles on fewer judged queries (with a relevant document) than this.
#: Chosen leave one corpus out among 5, 10 and 20 on the benchmark's three retrieval corpora
#: (``bench/studies/few_judgements.py``; 20 in all three folds): the draws settled at it were within 2 nDCG@10
#: points in 98% / 78% / 83% of cases on chatbot-questions / bbc-titles / news-titles, against 99% / 63% /
#: 72% at 10.
MIN_SETTLED_QUERIES = 20
#: The advice asks for judged queries in multiples of this, and for at most :data:`MAX_MORE_QUERIES`.
QUERY_STEP, MAX_MORE_QUERIES = 5, 100


def search_stopping_advice(estimates: pd.DataFrame, n_queries: int) -> dict[str, Any]:
    """Whether few search judgements settle the choice: the rule of :func:`stopping_advice` for
    ``estimates`` of :func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates` (nDCG@10, the named
    model first) after ``n_queries`` judged queries. Settled when the named model is within the run's
    tolerance of the best with at least :data:`SURE` chance and at least :data:`MIN_SETTLED_QUERIES`
    queries count; otherwise ``more_labels`` is the posterior's forecast of the judged queries that would
    settle it (``attrs["more_labels"]``; None when even :data:`MAX_MORE_QUERIES` more would not), or with
    too few queries, the minimum still to judge. Returns the same keys as :func:`stopping_advice`;
    ``reason`` is "sure", "few queries", "too close" or "not sure yet"."""
    n_queries = check_int(n_queries, "n_queries", min_value=0)
    needed = {"model", "estimate", "p_best", "p_within", "gap", "diff_sd"}
    missing = needed - set(getattr(estimates, "columns", ()))
    if missing or len(estimates) == 0:
        raise ValueError(
            f"estimates must be a few_judgement_estimates frame; missing columns {sorted(missing)}"
        )
    best, p, sure, either = _leader(estimates)
    tolerance = float(estimates.attrs.get("tolerance_points", DEFAULT_TOLERANCE))
    points = _points(tolerance, "nDCG@10 point")
    if sure >= SURE and n_queries >= MIN_SETTLED_QUERIES:
        return _advice(
            True, best, either, None, "sure", _settled_text(best, either, points, sure, p, "judged queries")
        )
    leads = f"{best} leads ({chance_words(p)} chance of being best)"
    if n_queries < MIN_SETTLED_QUERIES:
        more = MIN_SETTLED_QUERIES - n_queries
        text = (
            f"{leads}, but {n_queries} judged queries are too few to judge by; judge at least {more} more "
            "queries."
        )
        return _advice(False, best, either, more, "few queries", text)
    more = estimates.attrs.get("more_labels")
    return _unsettled(
        leads, best, either, more, MAX_MORE_QUERIES, points, sure, "judged queries", "the judgements"
    )
