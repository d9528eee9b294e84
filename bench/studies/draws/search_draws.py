"""The few-judgement answer for search judged on the answer benchmark's kept embeddings, leave one corpus
out: the product's posterior (:func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates` with
:func:`~flare_core.choosing.stopping.search_stopping_advice`, each judged query's nDCG@10 as its per-item
score) with its prior and error model against the alternatives it was chosen among (:data:`VARIANTS`),
and the label-free pick.

For each search corpus (a record whose oracle is ``ndcg_at_10``) the benchmark prior is learned from the
*other* search corpora: the label-free rule chosen on them among the geometric scores and its record by
rank in nDCG@10. A simulated person judges seeded draws of the corpus's own queries, the first k of a
seeded permutation, exactly as the product pools: each query's pool is the union of every candidate's top
:data:`~flare_core.answer.few_judgements.POOL_DEPTH` documents by cosine, judged by the corpus's
judgements restricted to the pool (a pooled document without one is not relevant); a query without a
relevant document in its pool is judged but does not count. Each estimate names a model, judged by the
oracle (each candidate's mean nDCG@10 over every query of the corpus, with every judgement).

:func:`summary` gives, per method and k: the mean nDCG@10 points lost against the oracle's best, the
share within :data:`TOLERANCE` points, the share settled (the product's advice, with its floor of judged
queries), the share of the settled draws within the tolerance, the calibration error of the stated chance
of being within it, the coverage of the stated 95% intervals, and how often the named model changes
between consecutive k; per corpus, the same for the worst corpus; and how often the forecast of "n more
queries" was named and came true.

Shapes: M candidates, Q queries of a corpus (those that count), k judged queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.few_judgements import POOL_DEPTH
from flare_core.answer.label_free import benchmark_cases
from flare_core.benchmark.answer_stage import oracle_series, record_table
from flare_core.benchmark.embedding_store import load_kept
from flare_core.benchmark.posterior_draws import GEOMETRIC_RULES
from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.accuracy_posterior import AccuracyPrior, estimate_frame, prior_by_rank
from flare_core.choosing.label_free_rules import choose_rule, ranked_by
from flare_core.choosing.probe_reading import ProbeReading
from flare_core.choosing.retrieval_eval import (
    SEARCH_LEVEL,
    few_judgement_estimates,
    per_query_scores,
    top_k_rows,
)
from flare_core.choosing.stopping import search_stopping_advice
from flare_core.choosing.validity import judgement_map

#: The answer benchmark's search corpora with real queries.
SEARCH_CORPORA = (
    "chatbot-questions", "data-science-faq", "semanlink-tags", "squad-paragraphs", "aia-bde-faq",
    "swedish-build-faq",
)  # fmt: skip
KS = (5, 10, 20, 40)
TOLERANCE = 2.0
SURE = 0.9
#: The methods judged, in the order the tables show them.
TODAY, LABEL_FREE = "product", "label-free"
#: The posterior's forecast of "n more queries" is checked at these k.
FORECAST_KS = (5, 10, 20)
#: The product's estimate, judged beside :data:`VARIANTS`: its prior ("flat": every model alike;
#: "benchmark": the record, on the other search corpora, of the rule chosen on them) and the widening of
#: the judgements' sampling error.
PRODUCT = {TODAY: ("flat", ap.SPREAD_INFLATION)}
#: The alternatives it was chosen among, name → (prior, widening).
VARIANTS = {
    "benchmark prior": ("benchmark", ap.SPREAD_INFLATION),
    "benchmark prior, x1.0": ("benchmark", 1.0),
    "benchmark prior, x2.0": ("benchmark", 2.0),
    "flat prior, x1.0": ("flat", 1.0),
    "flat prior, x2.0": ("flat", 2.0),
    "benchmark prior twice as wide": ("benchmark x2", ap.SPREAD_INFLATION),
}


@dataclass(frozen=True)
class PooledCorpus:
    """One search corpus as the simulated person judges it: ``candidates`` (M,), ``queries`` (every query
    id, in the judgements' order), ``ndcg`` (Q, M): each counted query's nDCG@10 on its judged pool (index:
    query id; the queries without a relevant pooled document are absent), ``tables`` (each candidate's
    :func:`per_query_scores` on those pools, index: query id) and ``oracle`` (M,): each candidate's mean
    nDCG@10 over every query with every judgement."""

    candidates: tuple[str, ...]
    queries: tuple[str, ...]
    ndcg: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    oracle: pd.Series


def pooled_judgements(
    query_emb: Mapping[str, np.ndarray],
    doc_emb: Mapping[str, np.ndarray],
    graded: Mapping[str, Mapping[int, int]],
    rows: Mapping[str, int],
) -> dict[str, dict[int, int]]:
    """Each query's pool (the union of every candidate's top :data:`POOL_DEPTH` documents for its own
    embedding ``query_emb[m]`` (Q, d) of the query among ``doc_emb[m]`` (D, d)) with the judgements
    ``graded`` restricted to it (a pooled document without one: 0); only the queries with a relevant
    document in their pool, in the order of ``graded``."""
    tops = [top_k_rows(np.asarray(query_emb[m]), np.asarray(doc_emb[m]), POOL_DEPTH) for m in query_emb]
    out: dict[str, dict[int, int]] = {}
    for query, grades in graded.items():
        pool = sorted({int(r) for top in tops for r in top[int(rows[query])]})
        judged = {r: int(grades.get(r, 0)) for r in pool}
        if any(g > 0 for g in judged.values()):
            out[query] = judged
    return out


def pooled_corpus(root: str | Path, name: str, record: Mapping[str, Any]) -> PooledCorpus:
    """The kept corpus ``name`` under ``root`` with its record's candidates, pooled as the product pools."""
    candidates = list(record["candidates"])
    kept = load_kept(root, name, candidates)
    graded, rows = judgement_map(kept.bench.judgements)
    docs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    asked = {m: np.asarray(kept.queries[m], dtype=np.float64) for m in candidates}
    counted = pooled_judgements(asked, docs, graded, rows)
    tables = {m: per_query_scores(asked[m], docs[m], counted, rows).set_index("query") for m in candidates}
    ndcg = pd.DataFrame({m: tables[m]["ndcg_at_10"] for m in candidates}).loc[list(counted)]
    return PooledCorpus(tuple(candidates), tuple(graded), ndcg, tables, oracle_series(dict(record)))


def lost(oracle: pd.Series, pick: str, models: Sequence[str]) -> float:
    """nDCG@10 points lost by ``pick`` against the oracle's best of ``models``."""
    return float(100.0 * (oracle.loc[list(models)].max() - oracle.loc[pick]))


def search_prior(records: Mapping[str, Mapping[str, Any]], name: str) -> tuple[str, list[str], AccuracyPrior]:
    """The rule chosen on the search corpora of ``records`` other than ``name`` (among
    :data:`GEOMETRIC_RULES`), the candidates of ``name`` ranked by it (M,) and the prior by rank learned
    from those corpora, in the candidates' order."""
    record = records[name]
    cases = benchmark_cases([dict(r) for n, r in records.items() if n != name], "search")
    rule = choose_rule(cases, GEOMETRIC_RULES)
    if rule is None:
        raise ValueError(f"no search corpus besides {name!r} to learn a prior from")
    candidates = list(record["candidates"])
    ranked = ranked_by(record_table(dict(record)).loc[candidates], rule)
    return rule, ranked, prior_by_rank(cases, rule, ranked).reordered(candidates)


def _stated(frame: pd.DataFrame, oracle: pd.Series, models: Sequence[str]) -> list[list[float]]:
    """Each model's stated chance of being within the tolerance beside its points lost."""
    return [
        [float(p), lost(oracle, str(m), models)]
        for m, p in zip(frame["model"], frame["p_within"], strict=True)
    ]


def judge_corpus(
    root: str | Path,
    name: str,
    records: Mapping[str, Mapping[str, Any]],
    draws: int,
    seed: int = 0,
    ks: Sequence[int] = KS,
    variants: Mapping[str, tuple[str, float]] = PRODUCT,
) -> list[dict[str, Any]]:
    """One row per draw, k and method on the kept search corpus ``name`` (and, with ``draw`` -1 and k 0,
    the label-free pick and each estimate's before any judgement); the benchmark prior learned from the
    other ``records``. A row: ``corpus``, ``draw``, ``k`` (queries judged), ``n_counted`` (of them with a
    relevant pooled document), ``method``, ``pick``, ``lost``, ``rule``, ``p_within`` (the named model's),
    ``settled``, ``stated`` ([chance, points lost] per model) and, at :data:`FORECAST_KS` when not
    settled, ``more`` (the forecast of "n more queries") and ``more_came_true`` (settled ``more`` counted
    queries later, in the same order; None past the corpus). Each of ``variants`` (method → (prior,
    widening of the judgements' sampling error)) is read as the product reads judgements
    (:func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates`, the model named at the k before
    kept unless the judgements favour another enough; settled by
    :func:`~flare_core.choosing.stopping.search_stopping_advice`)."""
    rule, ranked, benchmark = search_prior(records, name)
    pooled = pooled_corpus(root, name, records[name])
    models, oracle = list(pooled.candidates), pooled.oracle
    priors = {
        method: _prior(kind, benchmark, models).read_with(ProbeReading.widened(widening))
        for method, (kind, widening) in variants.items()
    }
    base = {"corpus": name, "rule": rule}
    rows: list[dict[str, Any]] = [
        {**base, "draw": -1, "k": 0, "n_counted": 0, "method": LABEL_FREE, "pick": ranked[0],
         "lost": lost(oracle, ranked[0], models)},
    ]  # fmt: skip
    for method, prior in priors.items():  # each estimate's pick before any judgement: its prior's
        frame = estimate_frame(prior, None, tolerance_points=TOLERANCE, chance_level=0.0, seed=0)
        pick = str(frame["model"].iloc[0])
        rows.append({**base, "draw": -1, "k": 0, "n_counted": 0, "method": method, "pick": pick,
                     "lost": lost(oracle, pick, models), "p_within": float(frame["p_within"].iloc[0])})  # fmt: skip
    counted = set(pooled.ndcg.index)
    for draw in range(draws):
        order = [
            pooled.queries[i] for i in np.random.default_rng([seed, draw]).permutation(len(pooled.queries))
        ]
        ordered_counted = [q for q in order if q in counted]
        named: dict[str, str | None] = {method: None for method in priors}
        for k in ks:
            chosen = [q for q in order[:k] if q in counted]
            row = {**base, "draw": draw, "k": int(k), "n_counted": len(chosen)}
            for method, prior in priors.items():
                out = _estimate_row({**row, "method": method}, prior, chosen, pooled, ordered_counted, draw,
                                    named[method])  # fmt: skip
                named[method] = out["pick"]
                rows.append(out)
    return rows


def _prior(kind: str, benchmark: AccuracyPrior, models: Sequence[str]) -> AccuracyPrior:
    """The prior a variant names: "flat" (every model alike), "benchmark" or "benchmark x<f>" (its spreads
    times f)."""
    if kind == "flat":
        return AccuracyPrior.flat(models, SEARCH_LEVEL)
    factor = float(kind.split(" x", 1)[1]) if " x" in kind else 1.0
    return replace(benchmark, sd=factor * benchmark.sd)


def _estimate_row(
    row: dict[str, Any],
    prior: AccuracyPrior,
    chosen: Sequence[str],
    pooled: PooledCorpus,
    ordered: Sequence[str],
    draw: int,
    named_before: str | None,
) -> dict[str, Any]:
    """``row`` with the pick after the judged queries ``chosen`` (those that count), read as the product
    reads them with ``prior``, and what it says."""
    models = list(pooled.candidates)
    if len(chosen) < 1:  # nothing to compare on: the prior's pick
        frame = estimate_frame(prior, None, tolerance_points=TOLERANCE, chance_level=0.0, seed=draw)
        pick = str(frame["model"].iloc[0])
        return {**row, "pick": pick, "lost": lost(pooled.oracle, pick, models), "settled": False}
    tables = {m: pooled.tables[m].loc[list(chosen)].reset_index() for m in models}
    frame = few_judgement_estimates(tables, prior=prior, seed=draw, tolerance_points=TOLERANCE,
                                    named_before=named_before)  # fmt: skip
    advice = search_stopping_advice(frame, len(chosen))
    pick = str(frame["model"].iloc[0])
    out = {**row, "pick": pick, "lost": lost(pooled.oracle, pick, models),
           "p_within": float(frame["p_within"].iloc[0]), "stated": _stated(frame, pooled.oracle, models),
           "settled": bool(advice["settled"]),
           "covered": float(np.mean([lo <= pooled.oracle[m] <= hi for m, lo, hi in
                                     zip(frame["model"], frame["ci_low"], frame["ci_high"], strict=True)]))}  # fmt: skip
    if row["k"] in FORECAST_KS and not out["settled"]:
        out["more"] = advice["more_labels"] if advice["reason"] == "not sure yet" else None
        out["reason"] = advice["reason"]
        out["more_came_true"] = _came_true(out["more"], ordered, len(chosen), pooled, prior, draw)
    return out


def _came_true(
    more: int | None, ordered: Sequence[str], n: int, pooled: PooledCorpus, prior: AccuracyPrior, draw: int
) -> bool | None:
    """Whether the answer was settled ``more`` counted queries after the first ``n`` of ``ordered``."""
    if more is None or n + more > len(ordered):
        return None
    chosen = list(ordered[: n + more])
    tables = {m: pooled.tables[m].loc[chosen].reset_index() for m in pooled.candidates}
    frame = few_judgement_estimates(tables, prior=prior, seed=draw, tolerance_points=TOLERANCE)
    return bool(search_stopping_advice(frame, len(chosen))["settled"])


def judge_all(
    root: str | Path,
    records: Mapping[str, Mapping[str, Any]],
    draws: int,
    seed: int = 0,
    ks: Sequence[int] = KS,
    variants: Mapping[str, tuple[str, float]] = PRODUCT,
) -> pd.DataFrame:
    """:func:`judge_corpus` on every search record of ``records`` (oracle ``ndcg_at_10``), each with a
    prior learned from the others."""
    search = {n: r for n, r in records.items() if r.get("oracle") == "ndcg_at_10"}
    return pd.DataFrame(
        [row for n in search for row in judge_corpus(root, n, search, draws, seed, ks, variants)]
    )


def calibration_error(stated: pd.DataFrame) -> float:
    """Expected calibration error of ``stated`` (columns ``stated``: a chance, ``observed``: whether it
    came true), in the bins 0-0.1-0.3-0.5-0.7-0.9-1: the gap of each bin's mean chance and share true,
    weighted by its size."""
    if stated.empty:
        return float("nan")
    bins = pd.cut(stated["stated"], [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], include_lowest=True)
    table = stated.groupby(bins, observed=True).agg(
        stated=("stated", "mean"), observed=("observed", "mean"), n=("stated", "size")
    )
    return float((table["n"] * (table["stated"] - table["observed"]).abs()).sum() / table["n"].sum())


def _changes(group: pd.DataFrame) -> float:
    """The share of consecutive k (per corpus and draw) at which the named model changed."""
    per_draw = (
        group.sort_values("k")
        .groupby(["corpus", "draw"])["pick"]
        .apply(lambda s: (s.to_numpy()[1:] != s.to_numpy()[:-1]).mean() if len(s) > 1 else np.nan)
    )
    return float(per_draw.mean())


def method_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per method and k (the label-free pick and the posterior's at k = 0): ``draws``,
    ``mean_lost``, ``within`` (share within :data:`TOLERANCE`), ``settled`` (share), ``settled_within``
    (share of the settled draws within the tolerance; NaN with none), ``n_settled``, ``calibration``
    (error of the stated chance of being within the tolerance, every model of every draw) and
    ``changes`` (share of draws whose pick changed since the k before; NaN at the first k)."""
    out = []
    for (method, k), group in rows.groupby(["method", "k"], sort=False):
        settled = (
            group[group["settled"].fillna(False).astype(bool)] if "settled" in group else group.iloc[0:0]
        )
        stated = _stated_pairs(group)
        out.append({
            "method": method, "k": int(k), "draws": len(group), "mean_lost": float(group["lost"].mean()),
            "within": float((group["lost"] <= TOLERANCE + 1e-9).mean()),
            "settled": float(len(settled) / len(group)) if k else float("nan"),
            "settled_within": float((settled["lost"] <= TOLERANCE + 1e-9).mean()) if len(settled) else float("nan"),
            "n_settled": len(settled), "calibration": calibration_error(stated),
        })  # fmt: skip
    table = pd.DataFrame(out)
    changes = []
    for method, k in zip(table["method"], table["k"], strict=True):
        before = [j for j in sorted(rows.loc[rows["method"] == method, "k"].unique()) if 0 < j < k]
        part = rows[(rows["method"] == method) & rows["k"].isin([before[-1], k] if before else [])]
        changes.append(_changes(part) if before else float("nan"))
    table["changes"] = changes
    first = list(dict.fromkeys([LABEL_FREE, TODAY, *rows["method"]]))
    return table.sort_values(["method", "k"], key=lambda s: s.map(first.index) if s.name == "method" else s,
                             ignore_index=True)  # fmt: skip


def summary(rows: pd.DataFrame) -> dict[str, Any]:
    """The tables of :func:`judge_all`'s rows: ``by_k`` (:func:`method_table`), ``overall`` per estimate
    over every k > 0 (``mean_lost``, ``settled_within``, ``n_settled``, ``calibration``, ``changes``),
    ``per_corpus`` (the same per corpus) and ``worst_corpus`` per estimate (the fewest settled draws
    within the tolerance, then the most points lost), ``forecast`` (how often the posterior's "n more
    queries" came true)."""
    out: dict[str, Any] = {"tolerance": TOLERANCE, "sure": SURE}
    out["by_k"] = method_table(rows).to_dict(orient="records")
    judged = rows[rows["k"] > 0]
    out["overall"] = {method: _overall(group) for method, group in judged.groupby("method")}
    per_corpus = [{"corpus": corpus, "method": method, **_overall(group)}
                  for (corpus, method), group in judged.groupby(["corpus", "method"])]  # fmt: skip
    out["per_corpus"] = per_corpus
    zero = rows[rows["k"] == 0].set_index(["corpus", "method"])["lost"]
    for row in per_corpus:
        row["label_free_lost"] = float(zero.get((row["corpus"], LABEL_FREE), np.nan))
    out["worst_corpus"] = {}
    out["forecast"] = {}
    for method in judged["method"].unique():
        mine = [r for r in per_corpus if r["method"] == method]
        out["worst_corpus"][method] = min(
            mine, key=lambda r: (_nan_high(r["settled_within"]), -r["mean_lost"])
        )
        asked = judged[(judged["method"] == method) & judged["k"].isin(FORECAST_KS)]
        if "more" not in asked:
            continue
        unsettled = asked[~asked["settled"].fillna(False).astype(bool)]
        told = unsettled.dropna(subset=["more_came_true"])
        out["forecast"][method] = {
            "unsettled": len(unsettled),
            "named": float(unsettled["more"].notna().mean()) if len(unsettled) else None,
            "told": len(told),
            "came_true": float(told["more_came_true"].astype(bool).mean()) if len(told) else None,
            "none_within": int(unsettled["more"].isna().sum()),
        }
    return out


def _stated_pairs(group: pd.DataFrame) -> pd.DataFrame:
    """Every stated chance of the rows of ``group`` (columns ``stated``) beside whether it came true
    (``observed``): the model within :data:`TOLERANCE` points of the best."""
    if "stated" not in group:
        return pd.DataFrame(columns=["stated", "observed"])
    pairs = [(p, lo <= TOLERANCE + 1e-9) for st in group["stated"] if isinstance(st, list) for p, lo in st]
    return pd.DataFrame(pairs, columns=["stated", "observed"])


def _nan_high(value: float) -> float:
    return 2.0 if value is None or np.isnan(value) else float(value)


def _overall(group: pd.DataFrame) -> dict[str, Any]:
    settled = group[group["settled"].fillna(False).astype(bool)]
    stated = _stated_pairs(group)
    return {
        "draws": len(group),
        "mean_lost": float(group["lost"].mean()),
        "within": float((group["lost"] <= TOLERANCE + 1e-9).mean()),
        "n_settled": len(settled),
        "settled_within": float((settled["lost"] <= TOLERANCE + 1e-9).mean())
        if len(settled)
        else float("nan"),
        "calibration": calibration_error(stated),
        "coverage": float(group["covered"].mean()) if "covered" in group else float("nan"),
        "changes": _changes(group),
    }
