"""Label-free rules for a provisional choice of model, and how the validity benchmark judges them.

A *rule* turns the label-free scores of a run's candidates (one row per model: ``flow``, ``gmm``, ``dim``,
``effective_rank``, ``uniformity``, …, each oriented so that higher is better) into one score per model;
its *pick* is the model with the highest score and its *short list* the three highest. The rules are
fixed in advance, the same for every corpus (none is fitted to a corpus):

==========================  ==========================================================================
rule                        score
==========================  ==========================================================================
``flow``, ``gmm``           information sufficiency (FLARE's flows, EMIR's mixtures)
``dim``                     the embedding's width
``effective_rank``          how many dimensions the texts spread over
``uniformity``              how evenly the texts cover the sphere (negated loss)
``width_then_flow``         the width, models of equal width ordered by information sufficiency
``width_and_flow``          the mean of the two ranks (width, information sufficiency)
==========================  ==========================================================================

Which rule the product follows is decided by the benchmark, *leave one corpus out*: for each corpus the
rule with the fewest points lost on the other corpora is chosen and judged on the corpus left out, so no
corpus judges a rule that was chosen on it (:func:`leave_one_corpus_out`). A model tied for the top of a
rule counts as a draw among the tied models: its points lost are their mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.data.language import READ_SHARE

SHORT_LIST = 3


def _ranks(values: pd.Series) -> pd.Series:
    """Average ranks, 1 for the lowest value, NaN kept."""
    return values.rank(method="average")


def _width_then_flow(table: pd.DataFrame) -> pd.Series:
    """The place (1 = last) of each model ordered by width, then by information sufficiency."""
    keyed = table[["dim", "flow"]].fillna({"flow": -np.inf}).dropna(subset=["dim"])
    order = keyed.sort_values(["dim", "flow"], kind="mergesort").index
    return pd.Series(np.arange(1.0, len(order) + 1.0), index=order).reindex(table.index)


def _width_and_flow(table: pd.DataFrame) -> pd.Series:
    return (_ranks(table["dim"]) + _ranks(table["flow"])) / 2.0


def _rank_and(column: str) -> Callable[[pd.DataFrame], pd.Series]:
    """The mean of the two ranks: the effective rank's and ``column``'s."""
    return lambda table: (_ranks(table["effective_rank"]) + _ranks(table[column])) / 2.0


#: Every rule: name → (plain words, score function of a table with one row per candidate).
RULES: dict[str, tuple[str, Callable[[pd.DataFrame], pd.Series]]] = {
    "flow": ("information sufficiency (normalizing flows)", lambda t: t["flow"]),
    "gmm": ("information sufficiency (Gaussian mixtures)", lambda t: t["gmm"]),
    "dim": ("the embedding's width", lambda t: t["dim"]),
    "effective_rank": ("how many dimensions the texts spread over", lambda t: t["effective_rank"]),
    "uniformity": ("how evenly the texts cover the sphere", lambda t: t["uniformity"]),
    "width_then_flow": (
        "the width, then information sufficiency between models of equal width",
        _width_then_flow,
    ),
    "width_and_flow": (
        "the width and information sufficiency together (mean of the two ranks)",
        _width_and_flow,
    ),
    "pseudo_ndcg": (
        "how well pseudo-queries cut from your texts find the rest of their text (nDCG@10)",
        lambda t: t["pseudo_ndcg"],
    ),
    "pseudo_mrr": (
        "how well pseudo-queries cut from your texts find the rest of their text (MRR@10)",
        lambda t: t["pseudo_mrr"],
    ),
    "pseudo_ndcg_sample": (
        "how well pseudo-queries cut from your texts find the rest of their text among "
        "the other pseudo-queries' texts",
        lambda t: t["pseudo_ndcg_sample"],
    ),
    "pseudo_fused": (
        "how far a model's answers to pseudo-queries cut from your texts agree with every candidate's "
        "together",
        lambda t: t["pseudo_fused"],
    ),
    "halves": ("how well the first half of a text finds its second half", lambda t: t["halves"]),
    "neighbours": (
        "how far the texts' nearest neighbours agree with the other models'",
        lambda t: t["neighbours"],
    ),
    "rank_and_pseudo": (
        "how many dimensions the texts spread over and the pseudo-queries (mean of the ranks)",
        _rank_and("pseudo_ndcg"),
    ),
    "rank_and_sample": (
        "how many dimensions the texts spread over and the pseudo-queries among each other (mean of the "
        "ranks)",
        _rank_and("pseudo_ndcg_sample"),
    ),
    "rank_and_fused": (
        "how many dimensions the texts spread over and the candidates' fused answers (mean of the ranks)",
        _rank_and("pseudo_fused"),
    ),
    "rank_and_halves": (
        "how many dimensions the texts spread over and the halves (mean of the ranks)",
        _rank_and("halves"),
    ),
    "rank_and_neighbours": (
        "how many dimensions the texts spread over and the neighbours' agreement (mean of the ranks)",
        _rank_and("neighbours"),
    ),
}


#: The columns a rule that combines two reads.
_NEEDED = {
    "width_then_flow": ["dim", "flow"],
    "width_and_flow": ["dim", "flow"],
    "rank_and_pseudo": ["effective_rank", "pseudo_ndcg"],
    "rank_and_sample": ["effective_rank", "pseudo_ndcg_sample"],
    "rank_and_fused": ["effective_rank", "pseudo_fused"],
    "rank_and_halves": ["effective_rank", "halves"],
    "rank_and_neighbours": ["effective_rank", "neighbours"],
}


def rule_scores(table: pd.DataFrame, rule: str) -> pd.Series:
    """The scores (one per model of ``table``, its index) that ``rule`` gives; NaN where it cannot score."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: choose from {list(RULES)}")
    needed = _NEEDED.get(rule, [rule])
    missing = [c for c in needed if c not in table]
    if missing:
        return pd.Series(np.nan, index=table.index)
    scores = RULES[rule][1](table.astype({c: float for c in needed})).astype(float)
    return _readers_first(scores, table) if LANGUAGE_GUARD else scores


#: Whether a model that cannot read the corpus's writing (``table["reads_corpus"]``, the share of the
#: corpus's texts it reads, under :data:`~flare_core.data.language.READ_SHARE`: one trained on English
#: only, on texts that are not; one that splits at spaces, on Chinese) comes after every model that can,
#: whatever the rule says. Judged on the answer benchmark against no guard (the docs' answer-benchmark
#: page, "the language guard").
LANGUAGE_GUARD = True


def cannot_read(table: pd.DataFrame) -> pd.Series:
    """Whether each model of ``table`` (index: model) cannot read the corpus's writing: its
    ``reads_corpus`` (the share of the texts it reads; 0 or 1 in earlier records) is under
    :data:`~flare_core.data.language.READ_SHARE`; False for every model when the table does not say, and
    for a model whose share is not known."""
    if "reads_corpus" not in table:
        return pd.Series(False, index=table.index)
    return table["reads_corpus"].astype(float).lt(READ_SHARE)


def _readers_first(scores: pd.Series, table: pd.DataFrame) -> pd.Series:
    """``scores`` with the models that cannot read the corpus moved below every one that can, in their
    own order; unchanged when the table does not say, or when no model (or every model) can read it."""
    cannot = cannot_read(table).reindex(scores.index, fill_value=False) & scores.notna()
    if not cannot.any() or (cannot | scores.isna()).all():
        return scores
    span = float(scores.max() - scores.min())
    return scores.where(~cannot, scores - (span + 1.0))


def ranked_by(table: pd.DataFrame, rule: str) -> list[str]:
    """The models of ``table`` best first under ``rule`` (ties kept in the table's order; unscored last)."""
    return _ranked(rule_scores(table, rule))


def _ranked(scores: pd.Series) -> list[str]:
    return scores.sort_values(ascending=False, kind="mergesort", na_position="last").index.tolist()


def top_models(table: pd.DataFrame, rule: str) -> list[str]:
    """Every model tied for the top of ``rule`` (empty when it scores none)."""
    return _top(rule_scores(table, rule))


def _top(scores: pd.Series) -> list[str]:
    scores = scores.dropna()
    return [] if scores.empty else scores.index[np.isclose(scores, scores.max(), rtol=0, atol=1e-12)].tolist()


def points_lost(oracle: pd.Series, picks: Sequence[str], models: Sequence[str]) -> float:
    """Points (100 × oracle units) lost by following ``picks`` (a draw among them) instead of the best of
    ``models``; NaN without a pick."""
    if not picks:
        return float("nan")
    best = float(oracle.loc[list(models)].max())
    return float(100.0 * (best - oracle.loc[list(picks)].mean()))


def judge_rule(cases: Sequence[Mapping[str, Any]], rule: str) -> pd.DataFrame:
    """One row per case (a corpus judged for one use): ``case``, ``lost`` (points lost by the rule's
    pick), ``short_list_lost`` (by the best model of its short list), ``rho`` (Spearman with the oracle).

    A case is ``{"case": name, "table": label-free scores (index: models), "oracle": Series,
    "models": the candidates}``."""
    rows = []
    for case in cases:
        table = case["table"].loc[list(case["models"])]
        oracle = case["oracle"]
        scores = rule_scores(table, rule)
        short = _ranked(scores)[:SHORT_LIST] if scores.notna().any() else []
        rows.append(
            {
                "case": case["case"],
                "lost": points_lost(oracle, _top(scores), case["models"]),
                "short_list_lost": points_lost(oracle, [max(short, key=lambda m: oracle[m])], case["models"])
                if short
                else float("nan"),
                "rho": ranking_correlation(scores, oracle.loc[table.index])
                if scores.notna().sum() > 2
                else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def rule_table(cases: Sequence[Mapping[str, Any]], rules: Sequence[str] = tuple(RULES)) -> pd.DataFrame:
    """Every rule judged on every case: ``rule``, ``mean_lost``, ``worst_lost``, ``mean_rho``,
    ``short_list_within_1`` (cases whose short list holds a model within 1 point of the best), ``cases``.
    Sorted by mean points lost, fewest first."""
    return _summarise({rule: judge_rule(cases, rule) for rule in rules})


def _summarise(judged: Mapping[str, pd.DataFrame], keep: Sequence[int] | None = None) -> pd.DataFrame:
    """:func:`rule_table` from each rule's :func:`judge_rule` rows, over the cases at positions ``keep``
    (all when None). A case's row does not depend on the other cases, so leaving one out reuses them."""
    rows = []
    for rule, frame in judged.items():
        frame = frame.iloc[list(keep)] if keep is not None and len(frame) else frame
        frame = frame.dropna(subset=["lost"]) if len(frame) else frame
        if frame.empty:
            continue
        rows.append(
            {
                "rule": rule,
                "mean_lost": float(frame["lost"].mean()),
                "worst_lost": float(frame["lost"].max()),
                "mean_rho": float(frame["rho"].mean()),
                "short_list_within_1": int((frame["short_list_lost"] <= 1.0 + 1e-9).sum()),
                "cases": len(frame),
            }
        )
    table = pd.DataFrame(rows)
    return (
        table.sort_values(["mean_lost", "mean_rho"], ascending=[True, False], ignore_index=True)
        if rows
        else table
    )


#: What a rule is chosen by: the mean Spearman correlation of its scores with the oracle over the cases.
#: It reads the order of every candidate, where the points lost read only the top one and swing with a
#: single corpus; the points lost are what the product then reports.
CRITERION = "mean_rho"


def choose_rule(cases: Sequence[Mapping[str, Any]], rules: Sequence[str] = tuple(RULES)) -> str | None:
    """The rule with the highest mean Spearman correlation over ``cases`` (ties: fewer points lost)."""
    return _chosen(rule_table(cases, rules))


def _chosen(table: pd.DataFrame) -> str | None:
    if table.empty:
        return None
    table = table.sort_values([CRITERION, "mean_lost"], ascending=[False, True], kind="mergesort")
    return str(table.iloc[0]["rule"])


def leave_one_corpus_out(
    cases: Sequence[Mapping[str, Any]], rules: Sequence[str] = tuple(RULES)
) -> dict[str, Any]:
    """The product's way of choosing, judged honestly: for each case, the rule chosen on the *other*
    cases and its points lost on this one. Returns ``rows`` (case, chosen rule, its pick, lost,
    short_list_lost), ``mean_lost``, ``worst_lost``, ``short_list_within_1`` (count of cases), ``cases``, and
    ``final``: the rule chosen on every case (what the product ships)."""
    # every case judged once per rule (n x rules), not again for each corpus left out (n^2 x rules): the four
    # uses of the shipped benchmark took 31.2 s and take 4.3 s (2 cores), with identical results
    judged = {rule: judge_rule(cases, rule) for rule in rules}
    rows = []
    for index, case in enumerate(cases):
        chosen = _chosen(_summarise(judged, [j for j in range(len(cases)) if j != index]))
        if chosen is None:
            continue
        row = judged[chosen].iloc[index]
        rows.append(
            {
                "case": case["case"],
                "rule": chosen,
                "pick": " or ".join(top_models(case["table"].loc[list(case["models"])], chosen)),
                "lost": row["lost"],
                "short_list_lost": row["short_list_lost"],
            }
        )
    frame = pd.DataFrame(rows)
    finite = frame.dropna(subset=["lost"]) if len(frame) else frame
    return {
        "rows": frame.to_dict(orient="records"),
        "mean_lost": float(finite["lost"].mean()) if len(finite) else None,
        "worst_lost": float(finite["lost"].max()) if len(finite) else None,
        "short_list_within_1": int((finite["short_list_lost"] <= 1.0 + 1e-9).sum()) if len(finite) else 0,
        "cases": len(finite),
        "final": _chosen(_summarise(judged)),
    }
