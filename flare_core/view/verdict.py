"""The verdict as people read it: a headline in the colour of its trust level, a sentence or two, and the
trust checks as a table. The Overview and Validation pages and the HTML report all show it from here.

Reads a stored verdict of any schema (:mod:`flare_core.answer.stored`): one of schema 3 with its grounds,
one of schema 2 as the label-free ranking alone, and one of an older run (schema 1: a ``text`` and a
``confidence``) as its text, in the neutral tone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.decide import chosen_candidates, pending_candidates, pending_words
from flare_core.answer.search_labels import METRIC as SEARCH_METRIC
from flare_core.answer.stored import has_grounds, has_trust
from flare_core.answer.words import interval_words
from flare_core.choosing.stopping import chance_words
from flare_core.view.results import labels_words

#: The tone of each trust level: the name of a Streamlit alert (``st.success``…) and a report CSS class.
TONES = {"high": "success", "moderate": "warning", "low": "error"}
STATUS_WORDS = {"pass": "passed", "warn": "caution", "fail": "failed", "not checked": "not checked"}
CHECK_WORDS = {
    "stability": "Same answer from fewer texts",
    "agreement": "Both estimators agree",
    "controls": "Untrained model ranks below trained ones",
    "shuffled": "Scrambled model carries no information",
    "sample size": "Enough texts for the dimensions",
    "pool": "Enough candidates to compare",
    "separation": "Leader is clearly ahead",
}


#: The tone of each ground of the answer (schema 3): settled by labels, or provisional.
BASIS_WORDS = {
    "labels": "Decided by your labels",
    "few labels": "From your labels so far",
    "label-free": "Provisional, without labels",
    "unranked": "Nothing to choose between",
}
#: The same for an answer from search judgements.
SEARCH_BASIS_WORDS = {
    "labels": "Decided by your search judgements",
    "few labels": "From your judgements so far",
}


@dataclass(frozen=True)
class VerdictView:
    """What to show: ``tone`` (success, warning, error or info), the ``headline``, the ``summary``,
    the label-free ranking's trust ``level`` (None for an old run or a run with nothing to rank), the
    ``checks`` table and the controls' sentences; for an answer of schema 3, its ``basis`` (in words:
    ``basis_words``), the ``next_step``, the ``map`` sentence (what the label-free ranking says) and the
    ``details`` a person may open (how the answer was reached)."""

    tone: str
    headline: str
    summary: str
    level: str | None
    provisional: bool
    checks: pd.DataFrame = field(repr=False)
    controls: list[str] = field(default_factory=list)
    basis: str | None = None
    next_step: str = ""
    map_sentence: str = ""
    cost_sentence: str = ""
    searched: bool = False
    details: str = ""

    @property
    def basis_words(self) -> str:
        """The answer's ground in words: "From your labels so far", or "… judgements …" for search."""
        words = SEARCH_BASIS_WORDS if self.searched else BASIS_WORDS
        return words.get(self.basis or "", BASIS_WORDS.get(self.basis or "", ""))


def verdict_view(verdict: dict[str, Any]) -> VerdictView:
    """The :class:`VerdictView` of a stored verdict (schema 1, 2 or 3)."""
    if not isinstance(verdict, dict):
        raise ValueError(f"a verdict is a dict, got {type(verdict).__name__}")
    if not has_trust(verdict):
        return VerdictView("info", str(verdict.get("text", "")), "", None, False, trust_checks({}))
    trust = verdict.get("trust") or {}
    level = trust.get("level")
    common = dict(
        headline=str(verdict.get("headline", "")),
        summary=str(verdict.get("summary", "")),
        level=level,
        provisional=bool(verdict.get("provisional")),
        checks=trust_checks(trust),
        controls=[str(row["text"]) for row in verdict.get("controls", []) if row.get("text")],
    )
    if not has_grounds(verdict):
        return VerdictView(tone=TONES.get(level, "info"), **common)
    basis = verdict.get("basis")
    tone = "success" if verdict.get("settled") else "info"
    map_sentence = " ".join(p for p in (verdict.get("map_headline"), verdict.get("map_summary")) if p)
    block = verdict.get({"labels": "labels", "few labels": "few_labels"}.get(basis or "", "")) or {}
    return VerdictView(
        tone=tone,
        basis=basis,
        next_step=str(verdict.get("next_step") or ""),
        searched=block.get("metric") == SEARCH_METRIC,
        map_sentence=map_sentence if basis != "unranked" else "",
        cost_sentence=str((verdict.get("cost") or {}).get("sentence") or ""),
        details=str(verdict.get("details") or ""),
        **common,
    )


def trust_checks(trust: dict[str, Any]) -> pd.DataFrame:
    """One row per trust check: ``check`` (plain words), ``result``, ``figure``, ``meaning``."""
    rows = [
        {
            "check": CHECK_WORDS.get(c["name"], c["name"]),
            "result": STATUS_WORDS.get(c["status"], c["status"]),
            "figure": c.get("figure", ""),
            "meaning": c.get("text", ""),
        }
        for c in trust.get("checks", [])
    ]
    return pd.DataFrame(rows, columns=["check", "result", "figure", "meaning"])


def trust_sentence(level: str | None) -> str:
    """One sentence on what the label-free ranking's trust level means."""
    return {
        "high": "Label-free ranking, trust: high — every check of this ranking passed.",
        "moderate": "Label-free ranking, trust: moderate — no check failed, but some could not pass; see "
        "the checks.",
        "low": "Label-free ranking, trust: low — at least one check failed: read it as a map, not an answer.",
    }.get(level or "", "")


#: The search columns of :func:`labels_table`: a plain phrase first, the measure's name after it.
SEARCH_QUALITY = "search quality (nDCG@10)"
FOUND = "relevant found in the top 10 (recall@10)"
FIRST_FOUND = "how soon the first relevant comes (MRR@10)"
#: The column of :func:`labels_table` that holds the chance of being the best (0 to 1; drawn as a bar).
BEST_COLUMN = "chance it is the best"


def within_column(points: float) -> str:
    """The column of :func:`labels_table` that holds the chance of being within ``points`` of the best."""
    return f"chance it is within {float(points):g} point{'' if float(points) == 1 else 's'} of the best"


def chance_columns(table: pd.DataFrame) -> list[str]:
    """The columns of ``table`` (a :func:`labels_table`) that hold a chance (0 to 1; drawn as a bar)."""
    return [c for c in table.columns if c == BEST_COLUMN or str(c).startswith("chance it is within ")]


def _with_chances(table: pd.DataFrame, write: Any) -> pd.DataFrame:
    """``table`` with each of its chance columns' values passed through ``write``."""
    out = table.copy()
    for column in chance_columns(out):
        if column in out.columns:
            out[column] = [write(v) for v in out[column]]
    return out


def chance_percents(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its chance columns as whole percents, for a bar on a page whose number reads as in the
    report (95 for 0.9545, "95%"; rounded down as :func:`chance_words` rounds, and within 1 to 99 as it
    never says "100%" or "0%")."""
    return _with_chances(table, lambda v: int(min(max(np.floor(100.0 * float(v) + 1e-9), 1), 99)))


def chances_in_words(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its chance columns written by :func:`chance_words` (for a static table)."""
    return _with_chances(table, chance_words)


def labels_table(verdict: dict[str, Any]) -> pd.DataFrame:
    """What the labels say, one row per candidate in words: the run's own labels (``model``, ``accuracy``,
    ``macro-F1`` when the classes are unbalanced, ``behind the best``, ``tied``) or a person's few labels
    (``model``, ``estimated accuracy``, ``likely between`` (:func:`~flare_core.answer.words.interval_words`),
    ``chance it is the best``, ``chance it is within <the run's tolerance> of the best``), in the answer's
    order. Empty without labels."""
    full, few = verdict.get("labels"), verdict.get("few_labels") or {}
    if full:
        pairs = full.get("metric") == "spearman"
        search = full.get("metric") == "ndcg@10"
        rows = []
        for r in full["rows"]:
            half = (r["gap_high"] - r["gap_low"]) / 2 if r["gap"] else 0.0
            score = (
                {"Spearman with your scores": f"{r['spearman']:.3f}"}
                if pairs
                else {
                    SEARCH_QUALITY: f"{100 * r['ndcg_at_10']:.1f}",
                    FOUND: f"{100 * r['recall_at_10']:.1f}%",
                    FIRST_FOUND: f"{r['mrr_at_10']:.3f}",
                }
                if search
                else {"accuracy": f"{100 * r['accuracy']:.1f}%", "macro-F1": f"{100 * r['f1_macro']:.1f}%"}
            )
            rows.append(
                {
                    "model": r["model"],
                    **score,
                    "behind the best": "best"
                    if r["model"] == full["best"]
                    else f"{r['gap']:.1f} points (± {half:.1f})",
                    "tied with the best": "yes" if r["tied"] else "",
                }
            )
        frame = pd.DataFrame(rows)
        return frame if pairs or search or full.get("balanced") is False else frame.drop(columns="macro-F1")
    if few.get("estimates") and few.get("metric") == "ndcg@10":
        # search judgements: nDCG@10 on the judged pools, in the answer's order, from the same estimate
        return pd.DataFrame(
            [
                {
                    "model": r["model"],
                    SEARCH_QUALITY: f"{100 * r['estimate']:.1f}",
                    "likely between": interval_words(r["ci_low"], r["ci_high"], unit=""),
                    FOUND: f"{100 * r['recall_at_10']:.1f}%",
                    BEST_COLUMN: float(r["p_best"]),
                    within_column(few.get("tolerance_points") or 1.0): float(r["p_within"]),
                }
                for r in few["estimates"]
            ]
        )
    if few.get("estimates"):
        # in the answer's order (highest estimate first): every column comes from the same estimate
        return pd.DataFrame(
            [
                {
                    "model": r["model"],
                    "estimated accuracy": f"{100 * r['estimate']:.1f}%",
                    "likely between": interval_words(r["ci_low"], r["ci_high"]),
                    BEST_COLUMN: float(r["p_best"]),
                    within_column(few.get("tolerance_points") or 1.0): float(r["p_within"]),
                }
                for r in few["estimates"]
            ]
        )
    return pd.DataFrame()


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def models_chosen_words(manifest: Mapping[str, Any]) -> str:
    """How many models a run compares, for its run line: the candidates the person chose ("4 models"),
    not the controls or partial models the product adds to check the ranking."""
    return _plural(len(chosen_candidates(manifest)), "model", "models")


def labels_given_words(
    corpus: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], search: Mapping[str, int] | None = None
) -> str:
    """What a run is judged by, for its run line: the labels a person gave it (``entries`` of
    :class:`flare_core.answer.labels.LabelSet`: "32 given, in 2 batches") when there are any, or the search
    queries a person judged (``search``: :func:`flare_core.view.results.search_judged`), else what its
    corpus holds (:func:`flare_core.view.results.labels_words`: its label column, search judgements, pairs,
    or "none")."""
    from flare_core.view.results import search_judged_words

    rows = {int(e["row"]) for e in entries}
    searched = search_judged_words(dict(search)) if search else None
    if searched and not (corpus.get("has_labels") and corpus.get("label_column")):
        return searched if not rows else f"{searched}; {len(rows):,} texts labelled"
    if not rows or (corpus.get("has_labels") and corpus.get("label_column")):
        return labels_words(dict(corpus))
    batches = max(int(e.get("batch", 0)) for e in entries)
    given = f"{len(rows):,} given"
    return f"{given}, in {_plural(batches, 'batch', 'batches')}" if batches else given


def without_asking(text: str) -> str:
    """``text`` with each request to label N more texts said as a fact about the run, for a reader who
    cannot label it (the answer's summary opens with the stopping advice, which asks)."""
    asks = (
        r"[;,]?\s*\blabel (about |at least )?(\d+) more texts(?: \(Check with a few labels\))?(?: to "
        r"settle it)?"
    )
    text = re.sub(asks, r"; \1\2 more labels would settle it", text, flags=re.I)
    judge = (
        r"[;,]?\s*\bjudge (about |at least )?(\d+) more quer(y|ies)(?: \(Check with a few "
        r"labels\))?(?: to settle it)?"
    )
    text = re.sub(judge, r"; \1\2 more judged quer\3 would settle it", text, flags=re.I)
    return text[2:] if text.startswith("; ") else text


def is_search_answer(verdict: Mapping[str, Any]) -> bool:
    """Whether an answer is a search run's: judged by search queries, or chosen for search without them."""
    grounds = [(verdict.get(key) or {}).get("metric") for key in ("labels", "few_labels")]
    return SEARCH_METRIC in grounds or (verdict.get("label_free") or {}).get("use") == "search"


def grounds_heading(verdict: Mapping[str, Any]) -> str:
    """The heading of the table of what the answer's grounds say: a search run's judgements, or labels."""
    return "What your judgements say" if is_search_answer(verdict) else "What the labels say"


def next_step_words(verdict: Mapping[str, Any], *, can_label: bool) -> str:
    """The answer's next step for this reader: as stored for whoever may label the run; for a viewer,
    what labels would change, never a request to give them."""
    step = str(verdict.get("next_step") or "")
    if can_label or verdict.get("settled") or verdict.get("basis") not in ("few labels", "label-free"):
        return step
    more = ((verdict.get("few_labels") or {}).get("advice") or {}).get("more_labels")
    search = is_search_answer(verdict)
    if verdict.get("basis") == "few labels" and more:
        n = int(more)
        what = f"judged quer{'y' if n == 1 else 'ies'}" if search else ("label" if n == 1 else "labels")
        return f"{n} more {what} would settle it; the run's owner can add them."
    return f"A few {'judged queries' if search else 'labels'} would settle it; the run's owner can add them."


def still_embedding_words(manifest: Mapping[str, Any], status: str) -> str | None:
    """While a run works with some candidates embedded and others not yet: which are still being embedded,
    in a few words for the status line of every page; None otherwise."""
    pending = pending_candidates(manifest)
    candidates = [m for m in manifest.get("models", []) if m.get("role", "candidate") == "candidate"]
    if status not in ("queued", "running") or not pending or len(pending) == len(candidates):
        return None
    return f"Still being embedded: {', '.join(pending)}."


def map_drawing_words(manifest: Mapping[str, Any], status: str, *, answered: bool) -> str | None:
    """While a run works after its answer (``answered``: a verdict is stored), that the answer and the
    few-label check can be used now, which candidates are still being embedded, and that the map is still
    being drawn, in words; None otherwise (before the answer, or once the run has ended)."""
    if status not in ("queued", "running") or not answered:
        return None
    candidates = [m for m in manifest.get("models", []) if m.get("role", "candidate") == "candidate"]
    pending = pending_candidates(manifest)
    if not candidates or len(pending) == len(candidates):
        return None
    the_map = (
        "The map (how much each model tells about the others, the pictures of each embedding space, what "
        "mean pooling hides) is still being drawn; its pages fill in as each part finishes."
    )
    if pending:
        return (
            "The quicker models have read your texts: the answer and Check with a few labels can be used "
            f"now. {pending_words(pending, running=True)} {the_map}"
        )
    return (
        f"The models have read your texts: the answer and Check with a few labels can be used now. {the_map}"
    )
