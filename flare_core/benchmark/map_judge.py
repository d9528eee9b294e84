"""The map stage's judgement: how well information sufficiency (and the geometric scores beside it) orders
each kept corpus's candidates like the corpus's oracle, per use, with intervals from resampling corpora.

A corpus's map record (:func:`map_record`) joins its answer record (``<corpus>/record.json`` beside the
kept vectors: the oracle columns and the geometric scores) with the IS scores of the matrices that
:mod:`flare_core.benchmark.map_kept` estimated: ``flow`` and ``gmm`` (the product's score: the median over
targets of the normalised IS) and every variant of each (``flow:cond_only_median_norm``, the conditional
term alone; ``flow:is_median_raw``, unnormalised; …). Each use judges the corpora that have its oracle:

=============  ==========================================================================================
use            oracle
=============  ==========================================================================================
classifier     5-fold logistic-regression accuracy (classification corpora)
neighbours     10-nearest-neighbour accuracy (classification corpora): search judged by the labels
grouping       V-measure of k-means (the classification corpora whose texts group by class)
search         nDCG@10 of the queries (retrieval corpora)
similarity     Spearman of pair cosines with the human scores (similarity corpora)
=============  ==========================================================================================

:func:`map_summary` gives, per use and score, the mean Spearman correlation over the corpora and the mean
points lost by following the score's top candidate (a draw among tied ones), each with a 95% interval
from resampling the corpora.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.benchmark.map_kept import MAP_ESTIMATORS, load_result, read_stage, unit_seconds
from flare_core.choosing.label_free_rules import points_lost
from flare_core.data.benchmark_corpora import GROUPED_BY_CLASS

#: Each use: (the record's oracle it needs, the table column it is judged by).
MAP_USES = {
    "classifier": ("accuracy", "oracle"),
    "neighbours": ("accuracy", "oracle_knn"),
    "grouping": ("accuracy", "oracle_vmeasure"),
    "search": ("ndcg_at_10", "oracle"),
    "similarity": ("sts_spearman", "oracle"),
}
#: The geometric scores judged beside information sufficiency (columns of the answer record).
GEOMETRIC = ("effective_rank", "dim", "uniformity", "isoscore", "silhouette")
#: The scores of the summary's short table: the product's IS scores, the conditional term alone, the
#: unnormalised IS, and the two geometric scores the answer's rules read most.
HEADLINE = (
    "flow",
    "flow:cond_only_median_norm",
    "flow:is_median_raw",
    "gmm",
    "gmm:cond_only_median_norm",
    "gmm:is_median_raw",
    "effective_rank",
    "dim",
)
#: Resamples of the corpora behind each interval.
RESAMPLES = 2000


def is_columns(out: str | Path, corpus: str) -> pd.DataFrame:
    """The IS scores of every finished estimator of ``corpus`` (index: model; controls included):
    ``<estimator>`` and ``<estimator>:<variant>`` columns; empty when none has finished."""
    from flare_core.analyses import sufficiency

    parts = []
    for estimator in MAP_ESTIMATORS:
        if read_stage(out, corpus, estimator) is None:
            continue
        result = load_result(out, corpus, estimator)
        score = sufficiency.model_scores(result, n_boot=0).set_index("model")["score"].rename(estimator)
        variants = sufficiency.all_scores(result).set_index("model").drop(columns=["n_targets"])
        parts += [score, variants.add_prefix(f"{estimator}:")]
    return pd.concat(parts, axis=1) if parts else pd.DataFrame()


def map_record(root: str | Path, out: str | Path, corpus: str) -> dict[str, Any]:
    """The map record of ``corpus``: its answer record's ``corpus``, ``task``, ``oracle``, ``n_texts``,
    ``candidates``, ``controls``, ``best`` and ``table`` (with the IS columns joined), ``groups_by_class``,
    ``stages`` (each finished estimator's ``stage.json`` less the models, with ``unit_seconds``: its units'
    seconds summed, None where the units were not kept, e.g. a stage estimated on another machine, whose
    ``stage.json`` then names it under ``machine``), ``seconds`` (the stages' wall seconds summed), and
    ``controls_outrank`` (estimator → control → how many candidates its score exceeds)."""
    answer = json.loads((Path(root) / corpus / "record.json").read_text(encoding="utf-8"))
    table = pd.DataFrame(answer["table"]).set_index("model")
    scores = is_columns(out, corpus)
    table = table.join(scores)
    stages = {}
    for estimator in MAP_ESTIMATORS:
        stage = read_stage(out, corpus, estimator)
        if stage is not None:
            stages[estimator] = {k: v for k, v in stage.items() if k not in ("models", "roles", "corpus")}
            stages[estimator]["unit_seconds"] = unit_seconds(out, corpus, estimator) or None
    candidates, controls = answer["candidates"], answer.get("controls", [])
    outrank = {
        estimator: {
            c: int((table.loc[candidates, estimator] < table.loc[c, estimator]).sum()) for c in controls
        }
        for estimator in stages
    }
    return {
        **{k: answer[k] for k in ("corpus", "task", "oracle", "n_texts", "candidates", "controls", "best")},
        "groups_by_class": corpus in GROUPED_BY_CLASS,
        "stages": stages,
        "seconds": round(sum(s["seconds"] for s in stages.values()), 1),
        "table": json.loads(
            table.rename_axis("model").reset_index().to_json(orient="records", double_precision=15)
        ),
        "controls_outrank": outrank,
    }


def map_cases(records: Sequence[dict[str, Any]], use: str) -> list[dict[str, Any]]:
    """The records judged for ``use`` (see :data:`MAP_USES`): each a case ``{"corpus", "table",
    "oracle", "models"}`` (the table indexed by model, the oracle a Series, the models the candidates)."""
    needed, column = MAP_USES[use]
    cases = []
    for record in records:
        if record["oracle"] != needed or (use == "grouping" and not record.get("groups_by_class")):
            continue
        table = pd.DataFrame(record["table"]).set_index("model")
        if column not in table or table[column].isna().all():
            continue
        oracle = table[column].astype(float)
        cases.append(
            {"corpus": record["corpus"], "table": table, "oracle": oracle, "models": record["candidates"]}
        )
    return cases


def judge_case(case: dict[str, Any], score: str) -> dict[str, float]:
    """``rho``: the Spearman correlation of ``score`` with the oracle over the case's candidates;
    ``lost``: the points lost by following the score's top candidate (a draw among tied ones); NaN when
    the case has no such score."""
    table, models = case["table"], list(case["models"])
    if score not in table or table.loc[models, score].notna().sum() < 3:
        return {"rho": float("nan"), "lost": float("nan")}
    values = table.loc[models, score].astype(float)
    finite = values.dropna()
    top = finite.index[np.isclose(finite, finite.max(), rtol=0, atol=1e-12)].tolist()
    return {
        "rho": ranking_correlation(values, case["oracle"].loc[models]),
        "lost": points_lost(case["oracle"], top, models),
    }


def without_fitted(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with the candidates fitted on the corpus itself (TF-IDF, doc2vec, fastText: the pool's
    ``corpus`` kind) left out, so that the judgement reads the pretrained candidates alone."""
    from flare_core.encoders import list_models

    fitted = {spec.id for spec in list_models() if spec.kind == "corpus"}
    return [{**r, "candidates": [m for m in r["candidates"] if m not in fitted]} for r in records]


def scores_of(records: Sequence[dict[str, Any]]) -> list[str]:
    """Every score the records hold: the IS scores and variants (in the first record's order), then
    :data:`GEOMETRIC`."""
    seen: list[str] = []
    for record in records:
        for column in record["table"][0] if record["table"] else {}:
            if column.split(":")[0] in MAP_ESTIMATORS and column not in seen:
                seen.append(column)
    return seen + list(GEOMETRIC)


def _interval(values: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The 95% percentile interval of the mean of ``values`` over :data:`RESAMPLES` resamples."""
    if values.size == 0:
        return float("nan"), float("nan")
    boot = rng.choice(values, size=(RESAMPLES, values.size)).mean(axis=1)
    return float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


#: The uses the papers report (each corpus judged once per use it has; the neighbours are a proxy, left out),
#: pooled in the summary's ``all`` rows as the papers' averages pool their datasets.
PAPER_USES = ("classifier", "grouping", "search", "similarity")


def _summary_row(use: str, score: str, judged: list[dict[str, Any]], rng: np.random.Generator) -> dict | None:
    """The mean ρ and points lost of ``judged`` (rows with ``rho`` and ``lost``) with their intervals."""
    rhos = np.asarray([j["rho"] for j in judged if np.isfinite(j["rho"])])
    lost = np.asarray([j["lost"] for j in judged if np.isfinite(j["lost"])])
    if rhos.size == 0:
        return None
    rho_low, rho_high = _interval(rhos, rng)
    lost_low, lost_high = _interval(lost, rng)
    return {
        "use": use,
        "score": score,
        "mean_rho": float(rhos.mean()),
        "rho_low": rho_low,
        "rho_high": rho_high,
        "mean_lost": float(lost.mean()) if lost.size else None,
        "lost_low": lost_low,
        "lost_high": lost_high,
        "top_is_best_on": int((lost <= 1e-9).sum()),
        "corpora": int(rhos.size),
    }


def map_summary(records: Sequence[dict[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """``scores``: one row per use and score (``use``, ``score``, ``mean_rho`` with ``rho_low`` /
    ``rho_high``, ``mean_lost`` with ``lost_low`` / ``lost_high``, ``top_is_best_on``, ``corpora``), and per
    score an ``all`` row over every case of :data:`PAPER_USES` (``corpora`` then counts cases);
    ``per_corpus``: one row per use, corpus and score (``rho``, ``lost``); ``uses``: each use's corpora.
    The intervals resample the corpora (seeded with ``seed``; each use and score its own stream)."""
    rows, per_corpus, uses = [], [], {}
    scores = scores_of(records)
    for position, use in enumerate(MAP_USES):
        cases = map_cases(records, use)
        if not cases:
            continue
        uses[use] = [case["corpus"] for case in cases]
        for index, score in enumerate(scores):
            judged = [
                {"use": use, "corpus": case["corpus"], "score": score, **judge_case(case, score)}
                for case in cases
            ]
            per_corpus += judged
            rows.append(_summary_row(use, score, judged, np.random.default_rng([seed, position, index])))
    for index, score in enumerate(scores):
        pooled = [j for j in per_corpus if j["score"] == score and j["use"] in PAPER_USES]
        rows.append(_summary_row("all", score, pooled, np.random.default_rng([seed, len(MAP_USES), index])))
    rows = [row for row in rows if row is not None]
    clean = json.loads(pd.DataFrame(rows).to_json(orient="records", double_precision=15)) if rows else []
    return {
        "uses": uses,
        "scores": clean,
        "per_corpus": json.loads(pd.DataFrame(per_corpus).to_json(orient="records", double_precision=15)),
    }


#: The rule sets compared leave one corpus out: the answer's geometric rules alone, and with information
#: sufficiency as one more rule (each estimator alone, and the width's rules that read the flows).
RULE_SETS = {
    "geometric": ("dim", "effective_rank", "uniformity"),
    "geometric + mixtures": ("dim", "effective_rank", "uniformity", "gmm"),
    "geometric + flows": ("dim", "effective_rank", "uniformity", "flow", "width_then_flow", "width_and_flow"),
}


def is_rule_table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Information sufficiency as a rule of the label-free answer, judged as the answer stage judges its
    rules (:func:`~flare_core.choosing.label_free_rules.leave_one_corpus_out` over the answer's cases of
    each use): per use and rule set of :data:`RULE_SETS`, on the corpora whose records hold every score the
    set reads, ``mean_lost``, ``worst_lost``, ``cases`` and ``final`` (the rule chosen on them all), beside
    the geometric rules alone on the same corpora (``alone_mean_lost``, ``alone_worst_lost``)."""
    from flare_core.answer.label_free import USE_WORDS, benchmark_cases
    from flare_core.choosing.label_free_rules import leave_one_corpus_out

    rows = []
    for name, rules in list(RULE_SETS.items())[1:]:
        needed = {"gmm"} if "gmm" in rules else {"flow"}
        held = [r for r in records if r["table"] and needed <= set(r["table"][0])]
        held = [r for r in held if all(row.get(s) is not None for row in r["table"] for s in needed)]
        for use in USE_WORDS:
            cases = benchmark_cases(list(held), use) if use != "unsure" else []
            if len(cases) < 3:
                continue
            alone = leave_one_corpus_out(cases, RULE_SETS["geometric"])
            loco = leave_one_corpus_out(cases, rules)
            rows.append(
                {
                    "use": use,
                    "rules": name,
                    "cases": loco["cases"],
                    "mean_lost": loco["mean_lost"],
                    "worst_lost": loco["worst_lost"],
                    "final": loco["final"],
                    "alone_mean_lost": alone["mean_lost"],
                    "alone_worst_lost": alone["worst_lost"],
                    "alone_final": alone["final"],
                }
            )
    return rows
