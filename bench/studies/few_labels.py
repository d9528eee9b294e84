"""Study: choosing a model from labels, judged on the benchmark's classification corpora.

Reads the embeddings cached by ``bench/studies/label_free_scores.py`` (the candidates of the benchmark pool,
128 tokens) and prints, per corpus and averaged over corpora, the tables of
:mod:`flare_core.benchmark.label_draws`:

1. few labels: k = 16 … 128 labelled texts, 30 seeded draws per k; texts chosen in batches of 16 by
   ``next_rows``' contest strategy against random texts, each with the product's estimator, and each
   single baseline (cross-validated LR, LogME, kNN leave-one-out) on random texts: share of draws within
   2 points of the best model and mean points lost;
2. the stopping advice: among draws where it says "settled", the share within 2 points;
3. full labels: the pick of ``compare_with_labels`` on one half of the texts judged on the other half.

Usage::

    .venv/bin/python bench/studies/few_labels.py [--corpora bbc-news,...] [--draws 30] [--splits 5]
        [--cache-dir runs/.bench-emb-cache] [--out-dir runs/few-labels] [--report-only]

Each corpus takes a few minutes on one core (set OMP_NUM_THREADS=1 when other work shares the cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from label_free_scores import corpus_embeddings  # noqa: E402

from flare_core.benchmark.label_draws import (  # noqa: E402
    few_label_draws,
    few_label_table,
    full_label_table,
    stopping_table,
)
from flare_core.benchmark.suite import BENCHMARK_MAX_LENGTH, default_models  # noqa: E402
from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, load_benchmark_corpus  # noqa: E402
from flare_core.encoders import get_spec  # noqa: E402


def classification_corpora() -> list[str]:
    return [name for name in BENCHMARK_CORPORA if load_benchmark_corpus(name).oracle == "classification"]


def run_corpus(name: str, cache_dir: Path, draws: int, splits: int, old: dict | None = None) -> dict:
    """Every draw and split of one corpus; with ``old`` (a previous result), only the full-label splits
    are computed again and its draws are kept."""
    candidates = [m for m in default_models() if get_spec(m).role == "candidate"]
    bench, embeddings = corpus_embeddings(name, candidates, cache_dir, BENCHMARK_MAX_LENGTH)
    labels = bench.frame["label"].astype(str).tolist()
    start = time.perf_counter()
    if old is None:
        draws_list = few_label_draws(embeddings, labels, draws=draws).to_dict(orient="records")
    else:
        draws_list = old["draws"]
    full = full_label_table(embeddings, labels, splits=splits)
    print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return {"draws": draws_list, "full": full.assign(tied=full["tied"].map(list)).to_dict(orient="records")}


def markdown(frame: pd.DataFrame, index: str, columns: str, value: str, fmt: str) -> str:
    table = frame.pivot_table(index=index, columns=columns, values=value, aggfunc="mean", sort=False)
    head = "| " + " | ".join([index, *[str(c) for c in table.columns]]) + " |"
    lines = [head, "|" + "---|" * (len(table.columns) + 1)]
    for row, values in table.iterrows():
        lines.append("| " + " | ".join([str(row), *[format(v, fmt) for v in values]]) + " |")
    return "\n".join(lines)


def frame_markdown(frame: pd.DataFrame) -> str:
    """A frame as a markdown table, floats with two decimals."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        cells = [format(v, ".2f") if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(results: dict[str, dict]) -> str:
    parts = []
    tables = []
    for name, result in results.items():
        draws = pd.DataFrame(result["draws"])
        table = few_label_table(draws).assign(corpus=name)
        table["method"] = (
            table["estimator"] + " on " + table["texts"].replace({"chosen": "contest-chosen"}) + " texts"
        )
        tables.append(table)
        stop = stopping_table(draws).assign(corpus=name)
        stop_chosen = stopping_table(draws, texts="chosen")
        full = pd.DataFrame(result["full"])
        parts.append(f"### {name}\n")
        parts.append(
            "share of draws within 2 points (%)\n\n"
            + markdown(table.assign(pct=100 * table["share_within"]), "method", "k", "pct", ".0f")
        )
        parts.append("mean points lost\n\n" + markdown(table, "method", "k", "mean_points_lost", ".2f"))
        parts.append("stopping advice (random texts)\n\n" + frame_markdown(stop))
        parts.append(
            "stopping advice (texts chosen by the contest strategy)\n\n" + frame_markdown(stop_chosen)
        )
        parts.append(
            f"full labels, pick on one half judged on the other ({len(full)} splits): mean points lost "
            f"{full['points_lost'].mean():.2f}, worst {full['points_lost'].max():.2f} (oracle C = 1); "
            f"{full.get('points_lost_tuned', full['points_lost']).mean():.2f}, worst "
            f"{full.get('points_lost_tuned', full['points_lost']).max():.2f} (same tuned probe); picks "
            f"{full['pick'].value_counts().to_dict()}; ties named {sum(len(t) > 0 for t in full['tied'])} of {len(full)}"
        )
    every = pd.concat(tables)
    mean = (
        every.groupby(["method", "k"], sort=False)[["share_within", "mean_points_lost"]].mean().reset_index()
    )
    parts.insert(
        0,
        "## Mean over corpora\n\nshare of draws within 2 points (%)\n\n"
        + markdown(mean.assign(pct=100 * mean["share_within"]), "method", "k", "pct", ".0f"),
    )
    parts.insert(1, "mean points lost\n\n" + markdown(mean, "method", "k", "mean_points_lost", ".2f"))
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora", default=None, help="comma-separated; default: every classification corpus"
    )
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.bench-emb-cache"))
    parser.add_argument(
        "--out-dir", type=Path, default=None, help="keep every corpus's draws in <out-dir>/<corpus>.json"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print the tables of the files in --out-dir, computing nothing",
    )
    parser.add_argument(
        "--full-only",
        action="store_true",
        help="recompute only the full-label splits of the files in --out-dir",
    )
    args = parser.parse_args(argv)
    names = args.corpora.split(",") if args.corpora else classification_corpora()
    results = {}
    for name in names:
        path = args.out_dir / f"{name}.json" if args.out_dir else None
        if args.report_only:
            if path is not None and path.is_file():
                results[name] = json.loads(path.read_text(encoding="utf-8"))
            continue
        old = json.loads(path.read_text(encoding="utf-8")) if args.full_only and path is not None else None
        results[name] = run_corpus(name, args.cache_dir, args.draws, args.splits, old)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results[name], default=_plain), encoding="utf-8")
    print(report(results))
    return results


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__}")


if __name__ == "__main__":
    main()
