"""What the validity benchmark says of the answer: how much each ground of it loses on labelled corpora.

- **Labels** (:func:`label_tables`, classification corpora): the pick of the labels made on one half of the
  texts and judged on the other; a person's few labels simulated by revealing the corpus's own labels
  (:mod:`flare_core.benchmark.label_draws`): the share of draws within 2 points of the best and the points
  lost, for the product's estimator on random and chosen texts and for each single baseline; and how often
  the stopping advice's "settled" was right.
- **Without labels** (:func:`label_free_summary`): for each use, the label-free rule chosen leave one corpus
  out (:mod:`flare_core.answer.label_free`), its points lost and its short list, beside every single rule.
- **Trust levels** (:func:`trust_levels`): the points each ground's picks lost, so that a level means what
  it says.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.label_free import USE_WORDS, benchmark_cases
from flare_core.benchmark.label_draws import (
    WITHIN_POINTS,
    few_label_draws,
    few_label_table,
    full_label_table,
    stopping_table,
)
from flare_core.choosing.label_free_rules import leave_one_corpus_out, rule_table
from flare_core.store.runs import Run

#: Half/half splits of the full-label judgement.
FULL_SPLITS = 5


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        for row in frame.astype(object).to_dict(orient="records")
    ]


def label_tables(
    run: Run, labels: list[str], candidates: list[str], *, seed: int = 0, draws: int = 30
) -> dict:
    """The labels' judgement of one classification corpus from the run's stored embeddings of its
    ``candidates``: ``few`` (:func:`few_label_table` rows), ``stopping`` (per k, random and chosen texts),
    ``full`` (:func:`full_label_table` rows, one per split)."""
    embeddings = {m: np.asarray(run.load_embeddings(m), dtype=np.float64) for m in candidates}
    sims = few_label_draws(embeddings, labels, draws=draws, seed=seed)
    stopping = pd.concat(
        [stopping_table(sims, texts).assign(texts=texts) for texts in ("random", "chosen")], ignore_index=True
    )
    full = full_label_table(embeddings, labels, splits=FULL_SPLITS, seed=seed)
    full = full.assign(tied=full["tied"].map(list))
    return {"few": _records(few_label_table(sims)), "stopping": _records(stopping), "full": _records(full)}


def label_free_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per use (search, grouping, classifier, unsure): the leave-one-corpus-out choice of rule with its
    points lost (``mean_lost``, ``worst_lost``, ``short_list_within_1``, ``cases``, ``rows`` per corpus,
    ``final`` rule) and every single rule judged on the same cases (``rules``)."""
    out = {}
    for use in USE_WORDS:
        cases = benchmark_cases(records, use)
        if not cases:
            continue
        loco = leave_one_corpus_out(cases)
        out[use] = {**loco, "rules": _records(rule_table(cases))}
    return out


def trust_levels(records: list[dict[str, Any]], label_free: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per ground of the answer as a person meets it, with what its picks lost on the benchmark:
    ``level``, ``judged`` (what was counted), ``mean_lost``, ``worst_lost``, ``within_2`` (share within 2
    points), ``count``."""
    rows = []
    full = [row for r in records for row in (r.get("labels") or {}).get("full", [])]
    if full:
        lost = np.array([row["points_lost"] for row in full], dtype=float)
        rows.append(
            _level("decided by your labels", "half/half splits, pick judged on the held-out half", lost)
        )
    stops = [row for r in records for row in (r.get("labels") or {}).get("few", [])]
    if stops:
        frame = pd.DataFrame(stops)
        product = frame[(frame["estimator"] == "product") & (frame["texts"] == "random")]
        rows.append(
            {
                "level": "few labels (16 to 128)",
                "judged": "draws of random texts, every k, every corpus",
                "mean_lost": float(product["mean_points_lost"].mean()),
                "worst_lost": None,
                "within_2": float(product["share_within"].mean()),
                "count": int(product["draws"].sum()),
            }
        )
    settled = [row for r in records for row in (r.get("labels") or {}).get("stopping", [])]
    if settled:
        frame = pd.DataFrame(settled)
        frame = frame[(frame["texts"] == "random") & (frame["n_settled"] > 0)]
        if len(frame):
            within = float((frame["settled_within"] * frame["n_settled"]).sum() / frame["n_settled"].sum())
            rows.append(
                {
                    "level": "few labels, said to be settled",
                    "judged": "the draws the advice called settled",
                    "mean_lost": None,
                    "worst_lost": None,
                    "within_2": within,
                    "count": int(frame["n_settled"].sum()),
                }
            )
    unsure = label_free.get("unsure")
    if unsure:
        lost = np.array([row["lost"] for row in unsure["rows"]], dtype=float)
        rows.append(
            _level("provisional, without labels", "each corpus and use, rule chosen on the others", lost)
        )
    return rows


def _level(level: str, judged: str, lost: np.ndarray) -> dict[str, Any]:
    lost = lost[np.isfinite(lost)]
    return {
        "level": level,
        "judged": judged,
        "mean_lost": float(lost.mean()) if lost.size else None,
        "worst_lost": float(lost.max()) if lost.size else None,
        "within_2": float((lost <= WITHIN_POINTS + 1e-9).mean()) if lost.size else None,
        "count": int(lost.size),
    }
