"""The validity benchmark in words and tables: the Markdown the README shows between its markers, and the
Validation page's table (from a ``benchmark.json`` of :mod:`flare_core.run.benchmark`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.run.benchmark import TABLE_SCORES, _agreement_row, _mean, _spearman, score_summary
from flare_core.run.benchmark_pools import pool_size_lines
from flare_core.store import atomic

README_START = "<!-- benchmark:start -->"
README_END = "<!-- benchmark:end -->"


def results_frame(result: dict[str, Any]) -> pd.DataFrame:
    """One row per corpus, in words: corpus, texts, best model by the labels, the verdict, trust, points
    lost by its leader, and the Spearman correlation of the flow ranking with the labels."""
    rows = [
        {
            "corpus": r["corpus"],
            "task": r["task"],
            "texts": r["n_texts"],
            "best model by the labels": r["best"],
            "verdict": r["verdict"]["recommended"] or "no recommendation",
            "leading model": r["verdict"]["leading"],
            "trust": r["verdict"]["trust"],
            "points lost by the leader": r["regret"]["leading"],
            "ranking vs labels (ρ)": _spearman(r, "flow"),
        }
        for r in result["corpora"]
    ]
    return pd.DataFrame(rows)


def _fmt(value: float | None, spec: str = "{:.2f}") -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and not math.isfinite(value))
        else spec.format(value)
    )


def _with_interval(row: dict[str, Any] | None) -> str:
    """``0.79 [0.14, 1.00]``: a Spearman correlation and its bootstrap interval."""
    if row is None:
        return "–"
    return f"{_fmt(row['spearman'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"


def markdown_table(result: dict[str, Any]) -> str:
    """The benchmark as Markdown: one row per corpus (each ρ with its bootstrap interval), the means,
    then every score and variant averaged over the corpora (:func:`score_summary`)."""
    head = (
        "| corpus | texts | best model (oracle) | verdict | trust | points lost | "
        + " | ".join(f"ρ {s} [interval]" for s in TABLE_SCORES)
        + " |"
    )
    lines = [head, "|" + "---|" * (6 + len(TABLE_SCORES))]
    for r in result["corpora"]:
        pick = r["verdict"]["recommended"] or f"none (leader: {r['verdict']['leading']})"
        lines.append(
            f"| {r['corpus']} | {r['n_texts']} | {r['best']} | {pick} | {r['verdict']['trust']} | "
            f"{_fmt(r['regret']['leading'], '{:.1f}')} | "
            + " | ".join(_with_interval(_agreement_row(r, s)) for s in TABLE_SCORES)
            + " |"
        )
    summary = result["summary"]
    lines.append(
        f"| **mean** | | | | | {_fmt(summary['mean_regret_leading'], '{:.1f}')} | "
        + " | ".join(_fmt(summary["mean_spearman"][s]) for s in TABLE_SCORES)
        + " |"
    )
    lines += _knn_lines(result) + pool_size_lines(result)
    scores = score_summary(result["corpora"])
    if not scores.empty:
        lines += [
            "",
            "| score | mean ρ | lowest ρ | mean τ | points lost by its top model (mean) | top model is the best on |",
            "|---|---|---|---|---|---|",
        ]
        n = len(result["corpora"])
        for row in scores.to_dict(orient="records"):
            lines.append(
                f"| {row['score']} | {_fmt(row['mean_spearman'])} | {_fmt(row['lowest_spearman'])} | "
                f"{_fmt(row['mean_kendall'])} | {_fmt(row['mean_points_lost_by_top'], '{:.1f}')} | "
                f"{row['top_is_best_on']} of {n} |"
            )
    return "\n".join(lines)


def _knn_lines(result: dict[str, Any]) -> list[str]:
    """The per-corpus table judged by kNN accuracy instead (classification corpora), with its means."""
    judged = [r for r in result["corpora"] if r.get("knn")]
    if not judged:
        return []
    lines = [
        "",
        "| corpus (kNN oracle) | best model (kNN) | points lost | "
        + " | ".join(f"ρ {s}" for s in TABLE_SCORES)
        + " |",
        "|" + "---|" * (3 + len(TABLE_SCORES)),
    ]
    for r in judged:
        knn = r["knn"]
        lines.append(
            f"| {r['corpus']} | {knn['best']} | {_fmt(knn['leading'], '{:.1f}')} | "
            + " | ".join(_fmt(_spearman(knn, s)) for s in TABLE_SCORES)
            + " |"
        )
    means = result["summary"].get("mean_spearman_knn", {})
    lines.append(
        f"| **mean** | | {_fmt(_mean([r['knn']['leading'] for r in judged]), '{:.1f}')} | "
        + " | ".join(_fmt(means.get(s)) for s in TABLE_SCORES)
        + " |"
    )
    return lines


def update_readme(path: str | Path, result: dict[str, Any]) -> None:
    """Replace the text between the benchmark markers of ``path`` with the table of ``result``."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        raise ValueError(f"{path} has no {README_START} … {README_END} section to fill")
    before, rest = text.split(README_START, 1)
    _, after = rest.split(README_END, 1)
    body = (
        f"\n{markdown_table(result)}\n\n"
        f"_{len(result['corpora'])} corpora, {len(result['models'])} ranked models, made "
        f"{result['created'][:10]} by `flare benchmark`._\n"
    )
    atomic.write_text(path, before + README_START + body + README_END + after)
