"""Whether a person's few labels settle the choice of model: :func:`stopping_advice`, read from the one
estimate of :func:`~flare_core.analyses.probes.few_label_estimates`, with the floors below which no chance
is trusted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from flare_core.analyses.probes import CURVE_TARGET, GOOD_ENOUGH_POINTS, SURE
from flare_core.checks import check_int

#: The stopping advice says "settled" when the leader is within :data:`GOOD_ENOUGH_POINTS` of the best
#: with at least :data:`SURE` chance and the floors below are met. The bootstrap's chance alone is not
#: calibrated on few labels per class or near guessing, hence the floors (measured on the benchmark's
#: classification corpora, 30 draws of random texts, k = 16 to 128).
#: No advice settles on fewer labels than this, or before two classes have two labels each (a text
#: alone in its class cannot be predicted without it, so such labels carry no evidence yet).
MIN_SETTLED_LABELS = 16
#: Nor on fewer labels per class than this: the estimates extrapolate to hundreds of labels per class,
#: and from a few per class they rank models by how flat their scores are. On health-tweets (16
#: classes, 8 labels per class at k = 128) 71% of draws settled and 3% of those were within 2 points;
#: chosen with :data:`ABOVE_CHANCE`, leave-one-corpus-out, among 8, 12, 16 and 24 (24 in all 7 folds).
MIN_LABELS_PER_CLASS = 24
#: Nor while the leader's estimated accuracy (the lower end of its 95% interval) is not this far above
#: guessing (1 / classes): when every model is near chance the ranking among them is noise. On
#: commons-speeches (every model at 48-56% on two classes) 17 draws settled, 3 of them within 2 points.
#: Chosen with :data:`MIN_LABELS_PER_CLASS`, leave-one-corpus-out, among 0, 0.05, 0.1, 0.15 and 0.2
#: (0.2 in 6 of 7 folds; 0.05 with debates-2016 held out).
ABOVE_CHANCE = 0.20
#: The advice asks for labels in multiples of this, and for at most :data:`MAX_MORE` at once.
LABEL_STEP, MAX_MORE = 8, 256


def stopping_advice(estimates: pd.DataFrame, n_labels: int) -> dict[str, Any]:
    """Whether ``estimates`` (a :func:`few_label_estimates` frame, best first) settle the choice after
    ``n_labels``, read from the same estimate as every other figure of the answer.

    Settled when the leader (the first row) is within :data:`GOOD_ENOUGH_POINTS` of the best with at least
    :data:`SURE` chance (``p_within``), with at least :data:`MIN_SETTLED_LABELS` labels, two classes of
    two labels or more, :data:`MIN_LABELS_PER_CLASS` labels per class (of ``attrs["n_classes"]``, 2 when
    absent; or :data:`CURVE_TARGET` of ``attrs["n_texts"]``, when fewer), and the lower end of the
    leader's accuracy interval (``ci_low``) at least :data:`ABOVE_CHANCE` above guessing (1 / classes).
    ``either`` lists the models that will do: those within :data:`GOOD_ENOUGH_POINTS` of the best with at
    least :data:`SURE` chance, the leader first. Otherwise ``more_labels`` is the number of labels at
    which the leader would be within that distance of the runner-up with :data:`SURE` chance (the
    per-text spread of their difference, ``diff_sd``, shrinking as 1/√n), in steps of
    :data:`LABEL_STEP`, and at least what the floors still need.

    Returns ``{"settled", "best", "either", "more_labels", "reason", "text"}``: ``reason`` is one of
    "sure", "few labels", "few per class", "near perfect", "near guessing", "too close" (the posterior's
    forecast: not even :data:`MAX_MORE` more would settle it), "not sure yet", and ``text`` says it in words.
    """
    n_labels = check_int(n_labels, "n_labels", min_value=0)
    needed = {"model", "estimate", "p_best", "p_within", "gap", "diff_sd", "ci_low"}
    missing = needed - set(getattr(estimates, "columns", ()))
    if missing or len(estimates) == 0:
        raise ValueError(f"estimates must be a few_label_estimates frame; missing columns {sorted(missing)}")
    lead = estimates.iloc[0]
    best, p, sure = str(lead["model"]), float(lead["p_best"]), float(lead["p_within"])
    either = [best] + [str(m) for m, q in zip(estimates["model"][1:], estimates["p_within"][1:], strict=True)
                       if q >= SURE]  # fmt: skip
    tolerance = float(estimates.attrs.get("tolerance_points", GOOD_ENOUGH_POINTS))
    n_classes = max(int(estimates.attrs.get("n_classes", 2)), 2)
    floor = MIN_LABELS_PER_CLASS * n_classes
    if estimates.attrs.get("n_texts"):
        # a small corpus: once CURVE_TARGET of its texts are labelled there is nothing to extrapolate to
        floor = min(floor, int(np.ceil(CURVE_TARGET * int(estimates.attrs["n_texts"]))))
    evidence = n_labels >= MIN_SETTLED_LABELS and estimates.attrs.get("n_classes_repeated", 2) >= 2
    enough = evidence and n_labels >= floor
    chance = 1.0 / n_classes
    informative = float(lead["ci_low"]) >= chance + ABOVE_CHANCE
    # a model carried past 100% is clipped there with no spread: its gap to another is not measured
    flags = estimates["past_ceiling"] if "past_ceiling" in estimates.columns else [False] * len(estimates)
    past = [str(m) for m, flag in zip(estimates["model"], flags, strict=True) if flag and m in either]
    points = _points(tolerance)
    if sure >= SURE and enough and informative and not past:
        return _advice(
            True, best, either, None, "sure", _settled_text(best, either, points, sure, p, "labels")
        )
    too_close = "more_labels" in estimates.attrs and estimates.attrs["more_labels"] is None
    floor_need = min(max(MIN_SETTLED_LABELS, floor) - n_labels, MAX_MORE)
    if "more_labels" in estimates.attrs:  # the posterior's own forecast (None: not within MAX_MORE)
        # too close to settle: ask for what the floors still need, not for labels that would not settle it
        more = (0 if floor_need > 0 else MAX_MORE) if too_close else int(estimates.attrs["more_labels"])
    else:
        more = _more_labels(estimates, n_labels)
    more = max(more, floor_need)
    if not evidence:
        reason = "few labels"
    elif not enough:
        reason = "few per class"
    elif past:
        reason = "near perfect"
    elif not informative:
        reason = "near guessing"
    elif too_close:
        reason = "too close"
    else:
        reason = "not sure yet"
    leads = f"{best} leads ({p:.0%} chance of being best)"
    text = _unsettled_words(reason, leads, n_labels, n_classes, more, sure=sure, past=past, points=points)
    return _advice(False, best, either, more, reason, text)


def _points(tolerance: float, unit: str = "point") -> str:
    """ "2 points", "1 point", "1.5 points"."""
    return f"{tolerance:g} {unit}" + ("" if tolerance == 1 else "s")


def _unsettled_words(
    reason: str,
    leads: str,
    n_labels: int,
    n_classes: int,
    more: int,
    *,
    sure: float,
    past: list[str],
    points: str,
) -> str:
    """The stopping advice in words when it is not settled, by its ``reason``."""
    if reason == "few labels":
        return f"{leads}, but {n_labels} labels are too few to judge by; label {more} more texts."
    if reason == "few per class":
        return (
            f"{leads}, but {n_labels} labels over {n_classes} classes are too few to be sure: with fewer "
            f"than {MIN_LABELS_PER_CLASS} per class the ranking is often wrong; label {more} more texts."
        )
    if reason == "near perfect":
        return (
            f"{leads}, but {', '.join(past)} would pass 100% with plenty of labels, so these labels cannot "
            f"tell the models near the top apart by a point; label {more} more texts."
        )
    if reason == "too close":
        return (
            f"{leads}; the models near the top are too close for {MAX_MORE} more labels to tell whether it is "
            f"within {points} of the best ({sure:.0%} chance now). It is a sound choice as it stands."
        )
    if reason == "near guessing":
        return (
            f"{leads}, but no model is yet surely better than guessing ({1.0 / n_classes:.0%}), so the "
            f"ranking cannot be trusted yet; label {more} more texts."
        )
    return (
        f"{leads}, but the labels cannot yet tell whether it is within {points} of the best "
        f"({sure:.0%} chance); label {more} more texts to settle it."
    )


def _more_needed(
    estimates: pd.DataFrame, n: int, step: int, most: int, tolerance: float = GOOD_ENOUGH_POINTS
) -> int:
    """Labelled items (texts or judged queries) at which the leader would be within
    :data:`GOOD_ENOUGH_POINTS` of the runner-up with :data:`SURE` chance: n' with z · sd / √n' = gap +
    tolerance, less the ``n`` given, in steps of ``step``, at most ``most``."""
    if len(estimates) < 2:
        return step
    gap = max(float(estimates["gap"].iloc[1]), 0.0) / 100.0 + tolerance / 100.0
    spread = max(float(estimates["diff_sd"].iloc[1]), 1e-3)
    needed = (float(stats.norm.ppf(SURE)) * spread / gap) ** 2
    more = int(np.ceil(max(needed - n, 1) / step) * step)
    return int(min(max(more, step), most))


def _more_labels(estimates: pd.DataFrame, n_labels: int) -> int:
    """Labels to add (:func:`_more_needed`, in steps of :data:`LABEL_STEP`, at most :data:`MAX_MORE`)."""
    return _more_needed(estimates, n_labels, LABEL_STEP, MAX_MORE)


def _settled_text(best: str, either: list[str], points: str, sure: float, p: float, more_of: str) -> str:
    """The settled advice in words: the models that each will do, or the one that is best."""
    if len(either) > 1:
        return (
            f"The top {len(either)} are each within {points} of the best with at least {SURE:.0%} "
            f"probability: either will do ({', '.join(either)})."
        )
    return (
        f"{best} is within {points} of the best with {sure:.0%} probability (best with {p:.0%}); "
        f"more {more_of} would hardly change the choice."
    )


def _advice(
    settled: bool, best: str, either: list[str], more: int | None, reason: str, text: str
) -> dict[str, Any]:
    return {"settled": settled, "best": best, "either": either, "more_labels": more, "reason": reason,
            "text": text}  # fmt: skip


#: No advice on search judgements settles on fewer judged queries (with a relevant document) than this.
#: Chosen leave one corpus out among 5, 10 and 20 on the benchmark's three retrieval corpora
#: (``bench/studies/few_judgements.py``; 20 in all three folds): the draws settled at it were within 2 nDCG@10
#: points in 98% / 78% / 83% of cases on chatbot-questions / bbc-titles / news-titles, against 99% / 63% /
#: 72% at 10.
MIN_SETTLED_QUERIES = 20
#: The advice asks for judged queries in multiples of this, and for at most :data:`MAX_MORE_QUERIES`.
QUERY_STEP, MAX_MORE_QUERIES = 5, 100


def search_stopping_advice(estimates: pd.DataFrame, n_queries: int) -> dict[str, Any]:
    """Whether few search judgements settle the choice: :func:`stopping_advice` for ``estimates`` of
    :func:`~flare_core.analyses.retrieval_eval.few_judgement_estimates` (nDCG@10, best first) after
    ``n_queries`` judged queries. Settled when the leader is within :data:`GOOD_ENOUGH_POINTS` nDCG@10
    points of the best with at least :data:`SURE` chance and at least :data:`MIN_SETTLED_QUERIES` queries
    count; otherwise ``more_labels`` is the number of judged queries more at which it would be (the per-query
    spread of the leader's difference with the runner-up shrinking as 1/√n), in steps of
    :data:`QUERY_STEP`. Returns the same keys as :func:`stopping_advice`; ``reason`` is "sure", "few
    queries" or "not sure yet"."""
    n_queries = check_int(n_queries, "n_queries", min_value=0)
    needed = {"model", "estimate", "p_best", "p_within", "gap", "diff_sd"}
    missing = needed - set(getattr(estimates, "columns", ()))
    if missing or len(estimates) == 0:
        raise ValueError(
            f"estimates must be a few_judgement_estimates frame; missing columns {sorted(missing)}"
        )
    lead = estimates.iloc[0]
    best, p, sure = str(lead["model"]), float(lead["p_best"]), float(lead["p_within"])
    either = [best] + [str(m) for m, q in zip(estimates["model"][1:], estimates["p_within"][1:], strict=True)
                       if q >= SURE]  # fmt: skip
    tolerance = float(estimates.attrs.get("tolerance_points", GOOD_ENOUGH_POINTS))
    points = _points(tolerance, "nDCG@10 point")
    enough = n_queries >= MIN_SETTLED_QUERIES
    if sure >= SURE and enough:
        return _advice(
            True, best, either, None, "sure", _settled_text(best, either, points, sure, p, "judged queries")
        )
    more = _more_queries(estimates, n_queries)
    if not enough:
        more = max(more, MIN_SETTLED_QUERIES - n_queries)
    leads = f"{best} leads ({p:.0%} chance of being best)"
    if not enough:
        text = f"{leads}, but {n_queries} judged queries are too few to judge by; judge {more} more queries."
        return _advice(False, best, either, more, "few queries", text)
    text = (
        f"{leads}, but the judgements cannot yet tell whether it is within {points} of the best "
        f"({sure:.0%} chance); judge {more} more queries to settle it."
    )
    return _advice(False, best, either, more, "not sure yet", text)


def _more_queries(estimates: pd.DataFrame, n_queries: int) -> int:
    """Judged queries to add (:func:`_more_needed`, in steps of :data:`QUERY_STEP`, at most
    :data:`MAX_MORE_QUERIES`)."""
    tolerance = float(estimates.attrs.get("tolerance_points", GOOD_ENOUGH_POINTS))
    return _more_needed(estimates, n_queries, QUERY_STEP, MAX_MORE_QUERIES, tolerance)
