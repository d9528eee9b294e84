"""The answer in words when a person's few labels or few search judgements decide it: the headline, the
summary, the next step and the short list, every figure from the one estimate of the few-label posterior
(:func:`~flare_core.choosing.probes.few_label_estimates`,
:func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flare_core.answer.search_labels import METRIC as SEARCH_METRIC
from flare_core.answer.stored import Decision, FewLabelsGround, LabelFreeGround
from flare_core.answer.words import NOT_MEASURED, interval_words, join_names, percent, points_words
from flare_core.choosing.stopping import chance_words


def from_few_labels(block: FewLabelsGround, choice: LabelFreeGround | None) -> Decision | None:
    """Headline, summary and fields of an answer from a person's few labels (None when they cannot
    decide yet: fewer than two categories labelled). Every figure comes from the one estimate of
    :func:`~flare_core.choosing.probes.few_label_estimates`: the recommended model is the one of highest
    estimated accuracy, and the stopping advice reads its chances."""
    if "estimates" not in block:
        return None
    if block.get("metric") == SEARCH_METRIC:
        return _from_few_judgements(block, choice)
    advice, rows = block["advice"], {r["model"]: r for r in block["estimates"]}
    best = advice["best"]
    top = rows[best]
    n = block["n_labels"]
    points = points_words(block.get("tolerance_points", 2.0))
    either = [m for m in advice.get("either", []) if m != best]
    within = f"chance of {chance_words(top['p_within'])} of being within {points} of the best"
    reason = advice.get("reason")
    if advice["settled"] and either:
        headline = (
            f"Use {best} or {join_names(either)}: after {n} labels each is within {points} of the best "
            "with at least 90% probability."
        )
        next_step = "Nothing more is needed: any of them will do."
    elif advice["settled"]:
        headline = f"Use {best}: after {n} labels it has a {within}."
        next_step = "Nothing more is needed; more labels would only narrow the estimates."
    elif reason == "too close":
        headline = (
            f"Use {best}: after {n} labels the models near the top are too close to tell apart, and "
            f"it has a {within}."
        )
        next_step = "More labels would hardly change the choice; label more only to narrow the estimates."
    elif reason == "few labels":
        headline = f"Provisionally {best}: {n} labels are too few to judge by yet."
        next_step = (
            f"Label {advice['more_labels'] or 'a few'} more texts (Check with a few labels) to judge by."
        )
    else:
        headline = (
            f"Provisionally {best}: after {n} labels it has a {within}; about "
            f"{advice['more_labels']} more labels would settle it."
        )
        next_step = f"Label about {advice['more_labels']} more texts (Check with a few labels) to settle it."
    estimate = _likely(top)
    summary = " ".join(
        part
        for part in (
            block.get("movement", ""),
            f"Its estimated accuracy with plenty of labels is {percent(top['estimate'])} ({estimate}).",
            f"The label-free choice was {choice['choice']}." if choice and choice["choice"] != best else "",
        )
        if part
    )
    details = " ".join(
        (
            advice["text"],
            "Each model is scored by how well a probe trained on your other labels predicts each labelled "
            "text; public corpora show how far such a score on this many labels per category sits from the "
            "accuracy with plenty of labels, and how much it can mislead. What they showed before any label "
            "is updated by each of your labels, and the interval and every chance come from that one "
            "estimate.",
        )
    )
    return {
        "basis": "few labels",
        "recommended": best,
        "settled": bool(advice["settled"]),
        "headline": headline,
        "summary": summary,
        "tied_with": either,
        "short_list": _short_list(best, either, block["estimates"]),
        "next_step": next_step,
        "details": details,
    }


def _queries(n: int, judged: str = "judged ") -> str:
    """ "1 judged query", "5 judged queries"."""
    return f"{n} {judged}quer{'y' if n == 1 else 'ies'}"


def _one_query(text: str) -> str:
    """``text`` with "1 judged queries are" and "1 more queries" said in the singular."""
    text = re.sub(r"\b1 judged queries are\b", "1 judged query is", text)
    return re.sub(r"\b1 more (judged )?queries\b", r"1 more \1query", text)


def _from_few_judgements(block: FewLabelsGround, choice: LabelFreeGround | None) -> Decision:
    """Headline, summary and fields of an answer from a person's few search judgements, in the words of
    :func:`from_few_labels`: every figure from the one estimate of
    :func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates`."""
    advice, rows = block["advice"], {r["model"]: r for r in block["estimates"]}
    best = advice["best"]
    top = rows[best]
    queries = _queries(block["n_labels"])
    points = points_words(block.get("tolerance_points", 2.0)) + " of search quality (nDCG@10)"
    either = [m for m in advice.get("either", []) if m != best]
    more, reason = advice["more_labels"], advice.get("reason")
    within = f"chance of {chance_words(top['p_within'])} of being within {points} of the best"
    if advice["settled"] and either:
        headline = (
            f"Use {best} or {join_names(either)}: after {queries} each is within {points} of the best with "
            "at least 90% probability."
        )
        next_step = "Nothing more is needed: either will do."
    elif advice["settled"]:
        headline = f"Use {best}: after {queries} it has a {within}."
        next_step = "Nothing more is needed; more judged queries would only narrow the estimates."
    elif reason == "too close":
        headline = (
            f"Use {best}: after {queries} the models near the top are too close to tell apart, and "
            f"it has a {within}."
        )
        next_step = (
            "More judged queries would hardly change the choice; judge more only to narrow the estimates."
        )
    elif reason == "few queries":
        headline = (
            f"Provisionally {best}: {queries} {'is' if block['n_labels'] == 1 else 'are'} too few "
            "to judge by yet."
        )
        next_step = f"Judge at least {_queries(more, 'more ')} (Check with a few labels) to judge by."
    else:
        headline = (
            f"Provisionally {best}: after {queries} it has a {within}; about "
            f"{_queries(more, 'more judged ')} would settle it."
        )
        next_step = f"Judge about {_queries(more, 'more ')} (Check with a few labels) to settle it."
    estimate = _likely(top, unit="")
    summary = " ".join(
        part
        for part in (
            f"On your {queries} its search quality (nDCG@10) is {100 * top['estimate']:.1f} out of 100 "
            f"({estimate}); it finds {percent(top['recall_at_10'])} of the documents you marked relevant in "
            "its top 10.",
            f"The label-free choice was {choice['choice']}." if choice and choice["choice"] != best else "",
        )
        if part
    )
    details = [
        _one_query(advice["text"]),
        "Each model ranks all your documents for each query; a document nobody judged counts as not relevant "
        "(the usual rule when only some documents are judged). The interval and every chance come from one "
        "estimate that each judged query updates, and one query alone cannot make it certain.",
    ]
    if block.get("no_relevant"):
        k = len(block["no_relevant"])
        details.append(
            f"{k} judged quer{'y has' if k == 1 else 'ies have'} no document marked relevant "
            f"({join_names(list(block['no_relevant'])[:3])}{', …' if k > 3 else ''}): kept, but not counted."
        )
    if block.get("unscored"):
        details.append(f"Not compared (they cannot embed a query): {join_names(list(block['unscored']))}.")
    return {
        "basis": "few labels",
        "recommended": best,
        "settled": bool(advice["settled"]),
        "headline": headline,
        "summary": summary,
        "tied_with": either,
        "short_list": _short_list(best, either, block["estimates"]),
        "next_step": next_step,
        "details": " ".join(details),
    }


def _likely(top: Mapping[str, Any], unit: str = "%") -> str:
    """The recommended model's 95% interval in words: "likely 71.2% to 80.4%", or "not measured yet" when
    it spans too much of the scale to say anything (:func:`~flare_core.answer.words.interval_words`)."""
    estimate = interval_words(top["ci_low"], top["ci_high"], unit=unit)
    return "not measured yet" if estimate == NOT_MEASURED else f"likely {estimate.replace(' and ', ' to ')}"


def _short_list(best: str, either: list[str], estimates: list[Mapping[str, Any]]) -> list[str]:
    """At most three models that may be best: the recommended one, those as good, then the likeliest best."""
    short = [best, *either]
    short += [r["model"] for r in sorted(estimates, key=lambda r: -r["p_best"]) if r["model"] not in short]
    return short[:3]
