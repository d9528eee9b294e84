"""The run's summary: one row per model joining every figure, the correlation table and the verdict."""

from __future__ import annotations

import pandas as pd

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.answer.write import write_verdict
from flare_core.store.runs import Run


def summarise(run: Run) -> pd.DataFrame:
    """The summary table (:func:`summary_table`), then the final verdict; returns the table."""
    table = summary_table(run)
    write_verdict(run, provisional=False)
    return table


def summary_table(run: Run) -> pd.DataFrame:
    """Join every per-model figure of the run into ``summary.parquet`` (one row per model), with the
    correlations of the label-free scores with the downstream ones when the run has both."""
    models = [m for m in run.manifest["models"] if m.get("status") == "done"]
    table = pd.DataFrame(
        {
            "model": [m["id"] for m in models],
            "role": [m.get("role", "candidate") for m in models],
            "dim": [m.get("dim") for m in models],
        }
    ).set_index("model")
    for estimator in ESTIMATOR_NAMES:
        if run.has("sufficiency", estimator, "scores.parquet"):
            scores = run.load_frame("sufficiency", estimator, "scores.parquet").set_index("model")
            table[f"{estimator}_score"] = scores["score"]
            table[f"{estimator}_ci_low"] = scores["ci_low"]
            table[f"{estimator}_ci_high"] = scores["ci_high"]
            table[f"{estimator}_rank"] = scores["rank"]
    if run.has("collapse", "summary.parquet"):
        socm = run.load_frame("collapse", "summary.parquet").set_index("model")
        table["socm_mean"] = socm["socm_mean"]
    if run.has("geometry.parquet"):
        geometry = run.load_frame("geometry.parquet").set_index("model")
        for column in ("uniformity", "isoscore", "effective_rank", "silhouette"):
            if column in geometry:
                table[column] = geometry[column]
    if run.has("downstream.parquet"):
        downstream = run.load_frame("downstream.parquet").set_index("model")
        for column in downstream.columns:
            if pd.api.types.is_numeric_dtype(downstream[column]):
                table[column] = downstream[column]
    table = table.reset_index()
    run.save_frame(table, "summary.parquet")
    _correlations(run, table)
    return table


LABEL_FREE_COLUMNS = ("socm_mean", "uniformity", "isoscore", "effective_rank", "silhouette", "dim")


def _correlations(run: Run, table: pd.DataFrame) -> None:
    """Every label-free score against every downstream score, across the run's candidate models."""
    from flare_core.analyses.correlate import correlation_table

    if not run.has("downstream.parquet"):
        return
    candidates = table[table["role"] == "candidate"].set_index("model")
    label_free = candidates[[c for c in LABEL_FREE_COLUMNS if c in candidates]].astype(float)
    for estimator in ESTIMATOR_NAMES:
        if run.has("sufficiency", estimator, "all_scores.parquet"):
            variants = run.load_frame("sufficiency", estimator, "all_scores.parquet").set_index("model")
            variants = variants.select_dtypes("number").drop(columns=["index", "n_targets"], errors="ignore")
            label_free = label_free.join(variants.add_prefix(f"{estimator}_"), how="left")
    downstream = run.load_frame("downstream.parquet").set_index("model").select_dtypes("number")
    downstream = downstream[[c for c in downstream.columns if not c.startswith("n_")]]
    downstream = downstream.loc[downstream.index.intersection(candidates.index)]
    if len(downstream) < 3:
        return
    run.save_frame(correlation_table(label_free, downstream, seed=0), "correlations.parquet")
