"""How the benchmark's judgement changes with the size of the pool, from one run on the whole pool.

IS(U → V) of a pair depends only on U and V, so the scores of a smaller pool are the whole run's per-pair
validation log-likelihoods aggregated over the smaller pool's targets only: no density is trained again.
For the first eight candidates (:data:`flare_core.encoders.registry.FIRST_POOL_IDS`, with the partial model
when the run has it), each benchmark record gets the Spearman correlation of every label-free score with
the oracle over that sub-pool's candidates, and the points lost by each score's top candidate there, beside
the same figures on the whole pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from flare_core.analyses.sufficiency import SufficiencyResult, model_scores
from flare_core.choosing.validity import agreement, regret_points
from flare_core.store.runs import Run

#: The scores compared across pool sizes (the benchmark's table scores).
POOL_SCORES = ("flow", "gmm", "dim", "effective_rank", "uniformity")


def subpool_scores(result: SufficiencyResult, keep: Sequence[str]) -> pd.Series:
    """Each source of ``result`` that is in ``keep`` scored over the targets in ``keep`` only (the median
    of IS / d_target, as the run scores its whole pool), indexed by model."""
    kept = set(keep)
    sub = dataclasses.replace(
        result,
        names=[n for n in result.names if n in kept],
        sources=[s for s in result.sources if s in kept],
        val_logp_cond={k: v for k, v in result.val_logp_cond.items() if k[0] in kept and k[1] in kept},
    )
    return model_scores(sub, n_boot=0).set_index("model")["score"]


def subpool_judgement(
    run: Run,
    table: pd.DataFrame,
    candidates: Sequence[str],
    controls: Sequence[str],
    pool: Sequence[str],
    seed: int = 0,
) -> dict[str, Any]:
    """The benchmark's judgement of ``run`` on the sub-pool ``pool``. ``table``: the benchmark's per-model
    table (index model; ``oracle``, ``role`` and the label-free scores), ``candidates`` and ``controls``
    of the whole run. Returns ``models`` (the sub-pool's ranked models), ``candidates``, ``agreement`` (one
    row per :data:`POOL_SCORES` score: Spearman with interval, Kendall) and ``regret`` (``top_<score>``:
    points lost by each score's top candidate)."""
    candidates = [m for m in candidates if m in pool]
    ranked = [m for m in table.index if m in pool and table.loc[m, "role"] != "control"]
    keep = [*ranked, *controls]
    scores = table[[s for s in POOL_SCORES if s in table.columns]].copy()
    for estimator in ("flow", "gmm"):
        folder = run.artefact("sufficiency", estimator, "result")
        if estimator in scores and folder.is_dir():
            scores[estimator] = subpool_scores(SufficiencyResult.load(folder), keep).reindex(scores.index)
    oracle = table["oracle"].astype(float)
    regret = {}
    for column in scores.columns:
        values = scores.loc[candidates, column].astype(float)
        top = values.idxmax() if values.notna().any() else None
        regret[f"top_{column}"] = regret_points(oracle, top, candidates)
    agree = agreement(scores.astype(float), oracle, candidates, seed=seed)
    return {
        "models": ranked,
        "candidates": candidates,
        "agreement": [
            {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
            for row in agree.to_dict(orient="records")
        ],
        "regret": regret,
    }


def pool_judgements(
    run: Run, table: pd.DataFrame, candidates: Sequence[str], controls: Sequence[str], seed: int = 0
) -> dict[str, Any] | None:
    """``{"first": judgement on the first eight candidates, "whole": on every ranked model}``
    (:func:`subpool_judgement`) when the run's candidates include the first eight and more; else None."""
    from flare_core.encoders.registry import FIRST_POOL_IDS, PARTIAL_IDS

    if not set(FIRST_POOL_IDS) <= set(candidates) or set(candidates) == set(FIRST_POOL_IDS):
        return None
    first = [*FIRST_POOL_IDS, *PARTIAL_IDS]
    return {
        "first": subpool_judgement(run, table, candidates, controls, first, seed),
        "whole": subpool_judgement(run, table, candidates, controls, list(table.index), seed),
    }


def _spearman(judgement: dict[str, Any], score: str) -> float | None:
    row = next((r for r in judgement["agreement"] if r["score"] == score), None)
    return None if row is None else row["spearman"]


def _pair(a: float | None, b: float | None, spec: str = "{:.2f}") -> str:
    shown = ["–" if v is None or v != v else spec.format(v) for v in (a, b)]
    return f"{shown[0]} → {shown[1]}"


def pool_size_lines(result: dict[str, Any]) -> list[str]:
    """Markdown: per corpus, each score's ρ and its top model's points lost on the first eight candidates
    → on the whole pool, and the means (empty when no record has both)."""
    judged = [r for r in result.get("corpora", []) if r.get("pools")]
    if not judged:
        return []
    first, whole = (
        len(judged[0]["pools"]["first"]["candidates"]),
        len(judged[0]["pools"]["whole"]["candidates"]),
    )
    head = (
        " | ".join(f"ρ {s}" for s in POOL_SCORES) + " | " + " | ".join(f"lost, top {s}" for s in POOL_SCORES)
    )
    lines = [
        "",
        f"| corpus ({first} → {whole} candidates) | {head} |",
        "|" + "---|" * (1 + 2 * len(POOL_SCORES)),
    ]
    sums: dict[str, list[tuple[float, float]]] = {}
    for record in judged:
        a, b = record["pools"]["first"], record["pools"]["whole"]
        cells = []
        for score in POOL_SCORES:
            cells.append(_pair(_spearman(a, score), _spearman(b, score)))
            sums.setdefault(f"rho_{score}", []).append((_spearman(a, score), _spearman(b, score)))
        for score in POOL_SCORES:
            pair = (a["regret"].get(f"top_{score}"), b["regret"].get(f"top_{score}"))
            cells.append(_pair(*pair, spec="{:.1f}"))
            sums.setdefault(f"lost_{score}", []).append(pair)
        lines.append(f"| {record['corpus']} | " + " | ".join(cells) + " |")
    means = [_mean_pair(sums[f"rho_{s}"]) for s in POOL_SCORES]
    means += [_mean_pair(sums[f"lost_{s}"], "{:.1f}") for s in POOL_SCORES]
    lines.append("| **mean** | " + " | ".join(means) + " |")
    return lines


def _mean_pair(pairs: list[tuple[float | None, float | None]], spec: str = "{:.2f}") -> str:
    def mean(values: list[float | None]) -> float | None:
        finite = [float(v) for v in values if v is not None and v == v]
        return sum(finite) / len(finite) if finite else None

    return _pair(mean([p[0] for p in pairs]), mean([p[1] for p in pairs]), spec)
