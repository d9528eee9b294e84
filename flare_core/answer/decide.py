"""The answer in words: which model to use and on what grounds, the first thing a person reads.

The grounds, strongest first:

1. **labels**: the run's own label column (every text labelled): the best cross-validated candidate, with
   the candidates it cannot be told apart from named as tied;
2. **few labels**: labels a person gave the run: the candidate most likely best, settled or not, with the
   labels that would settle it;
3. **label-free**: the provisional choice of the rule the benchmark measured best for the use, with how
   often such a choice was right there, and the offer of a few labels;
4. **unranked**: one candidate only, nothing to choose between.

Schema (``verdict.json``, version 3; the types in :mod:`flare_core.answer.stored`) — version 2's keys, for the
label-free ranking (the map), plus::

    basis          "labels" | "few labels" | "label-free" | "unranked"
    recommended    the model to use (for "label-free", the provisional choice); None when unranked
    settled        True when labels settled the choice
    short_list     at most three models that may be best, best first
    tied_with      models the labels cannot tell from the recommended one
    next_step      one sentence: what the person can do to get (or firm up) the answer
    labels, few_labels, label_free    the blocks behind each ground (None when absent)
    agreement      Spearman of the label-free ranking with the labels, over the candidates (with labels)
    pending        candidates not embedded yet (still being embedded while the run works): the answer
                   compares the others, is provisional and unsettled until they are in
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flare_core.answer.few_words import from_few_labels
from flare_core.answer.label_free import check_sentence, odds_sentence
from flare_core.answer.search_labels import METRIC as SEARCH_METRIC
from flare_core.answer.stored import (
    VERDICT_VERSION,
    Decision,
    FewLabelsGround,
    LabelFreeGround,
    LabelsGround,
    MapVerdict,
    Verdict,
)
from flare_core.answer.words import join_names, percent


def from_full_labels(block: LabelsGround, agreement: float | None, leading: str | None) -> Decision:
    """Headline, summary and fields of an answer decided by the run's own labels."""
    rows = {r["model"]: r for r in block["rows"]}
    best, tied = block["best"], list(block["tied"])
    top = rows[best]
    pairs = block.get("metric") == "spearman"
    search = block.get("metric") == SEARCH_METRIC
    if search:
        headline = f"Use {best}: nDCG@10 of {100 * top['ndcg_at_10']:.1f} (out of 100) on your search queries"
    elif pairs:
        headline = f"Use {best}: its similarities follow your pair scores at Spearman {top['spearman']:.2f}"
    else:
        headline = f"Use {best}: {percent(top['accuracy'])} accuracy on your labels"
    runner = block.get("runner_up")
    if tied:
        headline += f", tied with {join_names(tied)} (the labels cannot tell them apart)."
    elif runner:
        r = rows[runner]
        half = (r["gap_high"] - r["gap_low"]) / 2
        headline += f", {r['gap']:.1f} points (± {half:.1f}) ahead of {runner}."
    else:
        headline += "."
    if search:
        summary = (
            f"Judged on your {block['n_labels']:,} search queries: {block['method']}. It finds "
            f"{percent(top['recall_at_10'])} of the relevant documents in its top 10 (recall@10); its "
            f"MRR@10 is {top['mrr_at_10']:.2f}."
        )
    elif pairs:
        summary = f"Judged on your {block['n_labels']:,} scored pairs: {block['method']}."
    else:
        summary = (
            f"Judged by a classifier trained on your {block['n_labels']:,} labelled texts "
            f"({block['n_classes']} classes): {block['method']}; each figure comes from folds the choice of "
            "settings did not see."
        )
    if block.get("balanced") is False and not pairs:
        summary += f" The classes are unbalanced: its macro-F1 is {percent(top['f1_macro'])}."
    if agreement is not None and leading:
        summary += (
            f" The label-free ranking agreed with your "
            f"{'search judgements' if search else 'pair scores' if pairs else 'labels'} at ρ = "
            f"{agreement:.2f}; its leader, {leading}, {_behind(rows, leading, best)}."
        )
    return {
        "basis": "labels",
        "recommended": best,
        "settled": True,
        "headline": headline,
        "summary": summary,
        "tied_with": tied,
        "short_list": [best, *tied][:3],
        "next_step": "Nothing more is needed: your labels decided.",
    }


def _behind(rows: dict[str, Any], model: str, best: str) -> str:
    if model == best:
        return "is this model too"
    if model not in rows:
        return "is not a candidate here"
    return f"is {rows[model]['gap']:.1f} points behind"


def from_label_free(choice: LabelFreeGround, need: str | None = None) -> Decision:
    """Headline, summary and fields of the provisional, label-free answer."""
    best = choice["choice"]
    others = [m for m in choice["short_list"] if m != best]
    headline = f"Provisionally {best}, without labels."
    if others:
        headline = f"Provisionally {best}, without labels; the short list: {join_names([best, *others])}."
    languages = choice.get("languages") or ""
    summary = (
        (f"Your texts read as {languages}. " if languages else "")
        + rule_sentence(choice)
        + " "
        + odds_sentence(choice.get("odds") or {})
    ).strip()
    next_step = need or check_sentence(search=choice.get("use") == "search")
    return {
        "basis": "label-free",
        "recommended": best,
        "settled": False,
        "headline": headline,
        "summary": summary,
        "tied_with": [],
        "short_list": choice["short_list"],
        "next_step": next_step,
    }


def rule_sentence(choice: LabelFreeGround) -> str:
    """Which label-free rule chose, named as the benchmark chose it for the use, and what ranks in its
    place while its scores are not in yet (the same rule named the same way all through a run)."""
    stand_in, chosen = choice.get("stand_in"), choice.get("chosen_words") or choice["rule_words"]
    if not stand_in:
        return (
            f"Chosen by {choice['rule_words']}, the label-free rule measured best for {choice['use_words']}."
        )
    return (
        f"The label-free rule measured best for {choice['use_words']} is {chosen}; until it is measured on "
        f"your texts, {choice['rule_words']} chooses in its place."
    )


def chosen_candidates(manifest: Mapping[str, Any]) -> list[str]:
    """The candidates the person chose for a run (``manifest``), in its order: not the controls, the
    references or the partial models the product adds."""
    return [m["id"] for m in manifest.get("models", []) if m.get("role", "candidate") == "candidate"]


def pending_candidates(manifest: Mapping[str, Any]) -> list[str]:
    """The candidates of a run's ``manifest`` not embedded yet (neither stored nor failed), in its order."""
    return [
        m["id"]
        for m in manifest.get("models", [])
        if m.get("role", "candidate") == "candidate" and m.get("status") not in ("done", "failed")
    ]


def pending_words(pending: list[str], *, running: bool) -> str:
    """Which candidates the answer does not compare yet, in words: while the run works, that they are
    still being embedded and the answer will be checked again when they are; else that the run stopped
    before them."""
    n = len(pending)
    names = join_names(pending)
    if running:
        return (
            f"{n} {'model is' if n == 1 else 'models are'} still being embedded: {names}; the answer will be "
            f"checked again when {'it is' if n == 1 else 'they are'}."
        )
    return (
        f"{n} {'candidate was' if n == 1 else 'candidates were'} not embedded: {names}; the run stopped "
        f"before {'it' if n == 1 else 'them'}, and resuming it compares {'it' if n == 1 else 'them'} too."
    )


def _wait_for(decided: Decision, pending: list[str], *, running: bool) -> None:
    """``decided`` while ``pending`` candidates are not embedded: it says so, and is not settled."""
    decided["summary"] = f"{decided['summary']} {pending_words(pending, running=running)}".strip()
    if decided["settled"]:
        decided["settled"] = False
        decided["next_step"] = (
            "Nothing more is needed from you for now: the answer is checked again when the models still "
            "being embedded are in."
            if running
            else "Resume the run to compare the candidates it did not embed."
        )


def so_far(n_candidates: int | None, pending: list[str], failed: list[str]) -> str:
    """How a provisional answer opens: "So far, from 4 of 6 models: " while candidates are still being
    embedded (of the ``n_candidates`` the person chose), "While the run finishes: " once all are in."""
    if pending and n_candidates:
        compared = max(int(n_candidates) - len(pending) - len(failed), 0)
        return f"So far, from {compared} of {int(n_candidates)} models: "
    return "While the run finishes: "


def map_note(decided: Decision, leading: str | None) -> str | None:
    """Why the label-free ranking's leader is not the answer, in words (None when it is, or there is none)."""
    best = decided.get("recommended")
    if not leading or not best or leading == best:
        return None
    why = {
        "labels": f"your labels say {best}",
        "few labels": f"your labels so far point to {best}",
        "label-free": f"the label-free rule measured best for your use picks {best}",
    }.get(decided["basis"])
    return f"The map's leader, {leading}, is not the answer: {why}." if why else None


def compose(
    ranking: MapVerdict,
    *,
    full: LabelsGround | None = None,
    few: FewLabelsGround | None = None,
    choice: LabelFreeGround | None = None,
    agreement: float | None = None,
    provisional: bool = False,
    pending: list[str] | None = None,
    n_candidates: int | None = None,
) -> Verdict:
    """The version-3 verdict: ``ranking`` is the version-2 verdict of the label-free ranking (the map,
    :func:`~flare_core.answer.verdict.verdict` or ``unranked_verdict``); the grounds in order of strength.
    ``pending``: the candidates not embedded yet (still being embedded while ``provisional``);
    ``n_candidates``: how many candidates the person chose, for "so far, from N of M models"."""
    pending = list(pending or [])
    decided = None
    if full is not None:
        decided = from_full_labels(full, agreement, ranking.get("leading"))
    if decided is None and few is not None:
        decided = from_few_labels(few, choice)
    if (
        decided is None
        and choice is not None
        and ranking.get("ranking") is not None
        and len(choice["short_list"]) > 1
    ):
        decided = from_label_free(choice, need=(few or {}).get("need"))
    if decided is None:
        decided = {
            "basis": "unranked",
            "recommended": None,
            "settled": False,
            "headline": ranking["headline"],
            "summary": ranking["summary"],
            "tied_with": [],
            "short_list": [],
            "next_step": "Add a second candidate to compare them.",
        }
    if pending and decided["basis"] != "unranked":
        _wait_for(decided, pending, running=provisional)
    if provisional:
        decided["headline"] = (
            so_far(n_candidates, pending, ranking.get("failed") or [])
            + decided["headline"][0].lower()
            + decided["headline"][1:]
        )
    text = " ".join([decided["headline"], decided["summary"], decided["next_step"]])
    if ranking.get("failed"):
        text += f" Not compared because they failed: {join_names(list(ranking['failed']))}."
    map_headline = ranking["headline"]
    note = map_note(decided, ranking.get("leading"))
    if note:
        map_headline = f"{note} {map_headline}"
    return {
        **ranking,
        **decided,
        "version": VERDICT_VERSION,
        # the answer may still change: the run is not finished, candidates are not embedded yet, or its
        # ground has not settled the choice
        "provisional": bool(provisional)
        or bool(pending)
        or (decided["basis"] in ("few labels", "label-free") and not decided["settled"]),
        "pending": pending,
        "run_finished": not provisional,
        "map_note": note,
        "text": text,
        "labels": full,
        "few_labels": few,
        "label_free": choice,
        "agreement": agreement,
        "map_headline": map_headline,
        "map_summary": ranking["summary"],
    }
