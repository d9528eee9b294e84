"""Quality against cost: the models no other model beats on both (the Pareto front), and the cheapest
model that is good enough.

Inputs are two frames, one row per model:

- ``quality``: ``model``, ``quality`` (higher is better), ``ci_low``, ``ci_high`` (its interval; NaN when
  there is none) and ``label``, what the quality is. A label-based quality is in points (accuracy × 100,
  or a correlation × 100); a label that starts with ``"label-free"`` marks a score computed without labels,
  whose scale is its own. Optional: ``good_enough`` (bool), decided by whoever measured the quality (the
  answer: within 1 point of the best with 90% chance, or a paired gap interval within 1 point), and
  ``undecided`` (bool: the measurement cannot tell yet whether the model is good enough) with
  ``more_labels`` (the labels that would tell).
- ``costs``: ``model``, ``texts_per_s`` (higher is cheaper) and ``bytes_per_vector_float32`` (lower is
  cheaper); ``bytes_per_vector`` is accepted for the latter.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from flare_core.checks import check_choice, check_number
from flare_core.choosing.probes import DEFAULT_TOLERANCE

#: The costs a user can weigh quality against: (column, higher is cheaper).
COSTS = {"texts_per_s": True, "bytes_per_vector": False}
LABEL_FREE = "label-free"


def is_label_free(label: object) -> bool:
    """Whether a quality ``label`` names a score computed without labels."""
    return str(label).strip().lower().startswith(LABEL_FREE)


def _costs(costs: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(costs, pd.DataFrame) or "model" not in costs.columns:
        raise ValueError("costs must be a DataFrame with a 'model' column")
    frame = costs.copy()
    if "bytes_per_vector" not in frame.columns and "bytes_per_vector_float32" in frame.columns:
        frame["bytes_per_vector"] = frame["bytes_per_vector_float32"]
    return frame


def tradeoff_table(quality: pd.DataFrame, costs: pd.DataFrame) -> pd.DataFrame:
    """The models that have both a finite quality and costs: ``model``, ``quality``, ``ci_low``,
    ``ci_high``, ``label``, ``texts_per_s``, ``bytes_per_vector``; one row per model."""
    needed = {"model", "quality"}
    if not isinstance(quality, pd.DataFrame) or not needed <= set(quality.columns):
        raise ValueError(
            f"quality must be a DataFrame with columns {sorted(needed)} (ci_low, ci_high, label)"
        )
    table = quality.copy()
    for column in ("ci_low", "ci_high"):
        table[column] = table[column].astype(float) if column in table else np.nan
    table["label"] = table.get("label", "")
    cost = _costs(costs)
    keep = ["model", *(c for c in COSTS if c in cost.columns)]
    table = table.merge(cost[keep], on="model", how="inner")
    table = table[np.isfinite(table["quality"].astype(float))]
    return table.drop_duplicates("model").reset_index(drop=True)


def pareto_front(table: pd.DataFrame, cost: str = "texts_per_s") -> pd.Series:
    """Boolean, per row of ``table``: no other row is at least as good on quality and at least as cheap
    on ``cost`` while strictly better on one of them."""
    check_choice(cost, "cost", COSTS)
    quality = table["quality"].to_numpy(dtype=float)
    value = table[cost].to_numpy(dtype=float)
    cheap = value if COSTS[cost] else -value  # higher is cheaper
    front = []
    for i in range(len(table)):
        dominated = (
            (quality >= quality[i]) & (cheap >= cheap[i]) & ((quality > quality[i]) | (cheap > cheap[i]))
        )
        front.append(bool(np.isfinite(cheap[i]) and not dominated.any()))
    return pd.Series(front, index=table.index, name="pareto")


def _ratio_words(ratio: float, more: str, less: str) -> str:
    """``6× faster``, ``1.5× slower``, ``as fast`` (``more``/``less`` name the direction)."""
    if math.isclose(ratio, 1.0, rel_tol=0.05):
        return f"as {more}"
    value = ratio if ratio > 1 else 1 / ratio
    shown = f"{value:.0f}" if value >= 3 else f"{value:.1f}"
    return f"{shown}× {more if ratio > 1 else less}"


def _storage_words(ratio: float) -> str:
    """``half the storage``, ``a quarter of the storage``, ``twice the storage``, ``0.17× the storage``."""
    for value, words in (
        (1.0, "the same storage"),
        (0.5, "half the storage"),
        (2.0, "twice the storage"),
        (0.25, "a quarter of the storage"),
        (0.125, "an eighth of the storage"),
    ):
        if math.isclose(ratio, value, rel_tol=0.02):
            return words
    return f"{ratio:.2g}× the storage"


def _good_enough(table: pd.DataFrame, best: pd.Series, points: float, label_free: bool) -> pd.Series:
    """Which rows are good enough: as the quality's own ``good_enough`` column says when it has one (the
    best always is); label-free with intervals, those whose interval reaches the best's lower end (they
    cannot be told apart); otherwise those at most ``points`` below the best."""
    if "good_enough" in table.columns:
        return table["good_enough"].fillna(False).astype(bool) | (table["model"] == best["model"])
    best_low = float(best["ci_low"])
    if label_free and np.isfinite(best_low) and table["ci_high"].notna().all():
        return table["ci_high"] >= best_low
    return table["quality"] >= float(best["quality"]) - points


def cheapest_within(
    quality: pd.DataFrame,
    costs: pd.DataFrame,
    *,
    points: float = DEFAULT_TOLERANCE,
    cost: str = "texts_per_s",
    best: str | None = None,
) -> dict[str, Any] | None:
    """The cheapest model that is good enough, against the best one; None when no model has both a
    quality and costs.

    ``best``: the model the others are measured against (the answer's choice), by default the one of
    highest quality. Good enough: as the ``good_enough`` column says when ``quality`` has one; with a
    label-free quality (its label starts with ``"label-free"``) and intervals, a model whose interval
    reaches the best's lower bound; otherwise at most ``points`` below the best. Cheapest: the highest
    ``texts_per_s`` or the fewest ``bytes_per_vector`` (``cost``), ties broken by quality.

    Returns ``model``, ``best``, ``label_free``, ``speedup`` (its texts/s over the best's),
    ``storage_ratio`` (its bytes per vector over the best's), ``candidates`` (the good-enough models),
    ``undecided`` (the cheapest model cheaper than the pick that the measurement cannot judge yet, with
    ``more_labels``; None when there is none) and ``sentence``, e.g. "Cheapest within 1 point of the best
    (all-mpnet-base-v2): paraphrase-MiniLM-L3-v2, 6× faster, half the storage."
    """
    check_number(points, "points", min_value=0)
    check_choice(cost, "cost", COSTS)
    table = tradeoff_table(quality, costs)
    table = table[np.isfinite(table[cost].astype(float))] if cost in table else table.iloc[0:0]
    if table.empty:
        return None
    if best is not None and best in set(table["model"]):
        top = table.loc[table["model"] == best].iloc[0]
    else:
        top = table.loc[table["quality"].astype(float).idxmax()]
    label_free = is_label_free(top["label"])
    order = [cost, "quality"]
    ascending = [not COSTS[cost], False]
    pool = table[_good_enough(table, top, float(points), label_free)]
    pool = pool.sort_values(order, ascending=ascending, kind="stable")
    pick = pool.iloc[0]
    speedup = _ratio(pick, top, "texts_per_s")
    storage = _ratio(pick, top, "bytes_per_vector")
    undecided = _undecided(table, pick, cost) if "undecided" in table.columns else None
    record = None if undecided is None else _undecided_record(undecided, top)
    sentence = _sentence(pick, top, speedup, storage, points, label_free)
    if undecided is not None:
        sentence += " " + _undecided_sentence(undecided, record, top, points)
    return {
        "model": str(pick["model"]),
        "best": str(top["model"]),
        "label_free": label_free,
        "speedup": speedup,
        "storage_ratio": storage,
        "candidates": pool["model"].astype(str).tolist(),
        "undecided": record,
        "sentence": sentence,
    }


def _undecided(table: pd.DataFrame, pick: pd.Series, cost: str) -> pd.Series | None:
    """The cheapest model cheaper than ``pick`` that the measurement cannot judge yet (None if none)."""
    cheaper = table[table[cost] > pick[cost]] if COSTS[cost] else table[table[cost] < pick[cost]]
    cheaper = cheaper[cheaper["undecided"].fillna(False).astype(bool)]
    if cheaper.empty:
        return None
    return cheaper.sort_values([cost, "quality"], ascending=[not COSTS[cost], False], kind="stable").iloc[0]


def _undecided_record(row: pd.Series, best: pd.Series) -> dict[str, Any]:
    more = row.get("more_labels")
    return {
        "model": str(row["model"]),
        "behind": float(best["quality"]) - float(row["quality"]),
        "more_labels": int(more) if more is not None and np.isfinite(float(more)) else None,
        "speedup": _ratio(row, best, "texts_per_s"),
    }


def _undecided_sentence(row: pd.Series, record: dict[str, Any], best: pd.Series, points: float) -> str:
    amount = f"{points:g} point" + ("" if points == 1 else "s")
    speed = f" ({_ratio_words(record['speedup'], 'faster', 'slower')})" if record["speedup"] else ""
    behind = record["behind"]
    where = f"{behind:.1f} points behind" if behind > 0.05 else "level with it"
    high = float(row.get("gap_high", np.nan))
    if np.isfinite(high):
        where += f", and may be up to {high:.1f} behind"
    search = str(best.get("label", "")).startswith("nDCG@10")  # a search run's judged queries
    ground, more = ("judgements", "judged quer") if search else ("labels", "label")
    text = (
        f"The {ground} cannot tell yet whether {row['model']}{speed} is within {amount} of {best['model']}: "
        f"its estimate is {where}"
    )
    n = record["more_labels"]
    if n:
        plural = ("y" if n == 1 else "ies") if search else ("" if n == 1 else "s")
        return text + f"; about {n} more {more}{plural} would tell."
    return text + f"; more {more}{'ies' if search else 's'} would tell."


def _ratio(pick: pd.Series, best: pd.Series, column: str) -> float | None:
    if column not in pick.index:
        return None
    a, b = float(pick[column]), float(best[column])
    return a / b if np.isfinite([a, b]).all() and b > 0 else None


def _sentence(
    pick: pd.Series, best: pd.Series, speedup: float | None, storage: float | None, points: float, free: bool
) -> str:
    amount = f"{points:g} point" + ("" if points == 1 else "s")
    if free:
        scope = (
            f"Cheapest model the label-free score cannot tell apart from {best['model']} (no labels "
            "checked it)"
        )
    else:
        scope = f"Cheapest within {amount} of the best ({best['model']})"
    if pick["model"] == best["model"]:
        return f"{scope}: {best['model']} itself."
    parts = [str(pick["model"])]
    if speedup is not None:
        parts.append(_ratio_words(speedup, "faster", "slower"))
    if storage is not None:
        parts.append(_storage_words(storage))
    return f"{scope}: {', '.join(parts)}."
