"""Study: the few-label answer as a person reads it, judged on the benchmark's classification corpora.

For every corpus whose embeddings ``bench/studies/label_free_scores.py`` cached (``--models``, default the
benchmark's candidates) and every seeded draw of k random labelled texts (k = 16 … 128, the draws of
:func:`flare_core.benchmark.label_draws.few_label_draws`), the answer is built as the product builds it
(:func:`~flare_core.analyses.probes.few_label_estimates`, the stopping advice, the quality of
:func:`~flare_core.answer.costs.answer_quality` and the cheapest good-enough model of
:func:`~flare_core.analyses.tradeoff.cheapest_within`) and judged by the oracle (5-fold logistic regression
on all the corpus's texts):

1. the pick: share of draws within 2 points of the best, mean points lost;
2. "settled": how often, and how often right (within 2 points, and within 1);
3. the cheapest good-enough model: how often it is within 1 point of the best, over every draw and over the
   draws where it is not the recommended model itself;
4. reliability: every model's stated chance of being the best, and of being within 1 point of it, in bins,
   against how often that model was within 1 point of the best; the expected calibration error.

The speeds that rank the models by cost are nominal texts per second of each family on 2 CPU cores (static
models fastest), enough to order them; unknown models get the median.

Usage::

    .venv/bin/python bench/studies/few_label_answer.py [--corpora bbc-news,...] [--models a,b,...] [--draws 30]
        [--cache-dir runs/.bench-emb-cache]
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

from few_labels import classification_corpora, frame_markdown  # noqa: E402
from label_free_scores import corpus_embeddings  # noqa: E402

from flare_core.analyses import probes  # noqa: E402
from flare_core.analyses.probes import few_label_estimates  # noqa: E402
from flare_core.analyses.stopping import stopping_advice  # noqa: E402
from flare_core.analyses.tradeoff import cheapest_within  # noqa: E402
from flare_core.analyses.validity import oracle_scores, regret_points  # noqa: E402
from flare_core.answer.costs import answer_quality  # noqa: E402
from flare_core.benchmark.label_draws import KS, reliability_table  # noqa: E402
from flare_core.benchmark.suite import BENCHMARK_MAX_LENGTH, default_models  # noqa: E402
from flare_core.encoders import get_spec  # noqa: E402

#: Nominal texts per second on 2 CPU cores, by model family prefix (only their order matters here).
NOMINAL_SPEED = {
    "glove": 20000.0, "tokenlearn": 20000.0, "m2v": 15000.0, "fasttext": 10000.0, "tfidf": 5000.0,
    "doc2vec": 2000.0, "paraphrase-MiniLM-L3": 300.0, "all-MiniLM-L6": 150.0, "multilingual-e5": 80.0,
    "use-multilingual": 60.0, "all-mpnet": 20.0,
}  # fmt: skip


def _speed(model: str) -> float:
    for prefix, speed in NOMINAL_SPEED.items():
        if model.startswith(prefix):
            return speed
    return float(np.median(list(NOMINAL_SPEED.values())))


def _cheapest(verdict: dict, costs: pd.DataFrame) -> dict | None:
    quality = answer_quality(verdict)
    try:
        return cheapest_within(quality, costs, best=verdict["recommended"])
    except TypeError:  # a version of cheapest_within that measures against the highest quality only
        return cheapest_within(quality, costs)


def _remembered(function):
    """``function`` (:func:`~flare_core.analyses.probes.curve_scores`) remembering its results, so that the
    draws of every inflation share one computation of the per-text scores."""
    memory: dict = {}

    def wrapper(xs, rows, codes, probe, seed=0):
        key = (tuple(xs), rows.tobytes(), codes.tobytes(), probe, seed)
        if key not in memory:
            memory[key] = function(xs, rows, codes, probe, seed)
        return memory[key]

    return wrapper


def corpus_draws(
    name: str, models: list[str], cache_dir: Path, draws: int, inflations: tuple[float, ...] = (1.0,)
) -> list[dict]:
    bench, embeddings = corpus_embeddings(name, models, cache_dir, BENCHMARK_MAX_LENGTH)
    labels = bench.frame["label"].astype(str).to_numpy()
    oracle = oracle_scores(embeddings, labels=labels.tolist(), seed=0)["accuracy"]
    costs = pd.DataFrame(
        {"model": models, "texts_per_s": [_speed(m) for m in models],
         "bytes_per_vector_float32": [4.0 * embeddings[m].shape[1] for m in models]}
    )  # fmt: skip
    records = []
    kept = probes.curve_scores, getattr(probes, "SPREAD_INFLATION", 1.0)
    probes.curve_scores = _remembered(kept[0])
    try:
        for inflation in inflations:
            probes.SPREAD_INFLATION = inflation
            records += _draws(name, embeddings, labels, oracle, costs, draws, inflation)
    finally:
        probes.curve_scores, probes.SPREAD_INFLATION = kept
    return records


def _draws(name, embeddings, labels, oracle, costs, draws, inflation) -> list[dict]:
    models = list(embeddings)
    records = []
    for draw in range(draws):
        order = np.random.default_rng([0, draw]).permutation(labels.shape[0])
        for k in KS:
            rows = order[:k]
            if np.unique(labels[rows]).size < 2:
                continue
            frame = few_label_estimates(embeddings, rows, labels[rows].tolist(), seed=draw)
            advice = stopping_advice(frame, k)
            estimates = frame.to_dict(orient="records")
            verdict = {
                "recommended": advice["best"],
                "few_labels": {"n_labels": k, "estimates": estimates, "advice": advice},
            }
            cheap = _cheapest(verdict, costs)
            lost = {m: regret_points(oracle, m, models) for m in models}
            records.append(
                {
                    "corpus": name, "inflation": inflation, "k": k, "draw": draw, "pick": advice["best"], "lost": lost[advice["best"]],
                    "settled": bool(advice["settled"]), "cheap": cheap["model"] if cheap else None,
                    "cheap_lost": lost[cheap["model"]] if cheap else np.nan,
                    "chances": [
                        (r["model"], float(r["p_best"]), float(r.get("p_within", np.nan)), lost[r["model"]])
                        for r in estimates
                    ],
                }
            )  # fmt: skip
    return records


def reliability(records: list[dict], chance: str) -> tuple[pd.DataFrame, float]:
    """:func:`~flare_core.benchmark.label_draws.reliability_table` of these draws (``chance``: "p_best" or
    "p_within")."""
    return reliability_table(pd.DataFrame(records), chance=chance, points=1.0)


def report(records: list[dict]) -> str:
    frame = pd.DataFrame(records)
    frame["within_2"] = frame["lost"] <= 2.0 + 1e-9
    frame["within_1"] = frame["lost"] <= 1.0 + 1e-9
    frame["cheap_within_1"] = frame["cheap_lost"] <= 1.0 + 1e-9
    frame["cheaper"] = frame["cheap"] != frame["pick"]
    per_corpus = frame.groupby("corpus").agg(
        draws=("k", "size"), pick_within_2=("within_2", "mean"), mean_lost=("lost", "mean"),
        settled=("settled", "mean"), cheap_within_1=("cheap_within_1", "mean"), cheaper_named=("cheaper", "mean"),
    )  # fmt: skip
    settled = (
        frame[frame["settled"]]
        .groupby("corpus")
        .agg(
            n_settled=("k", "size"),
            settled_within_2=("within_2", "mean"),
            settled_within_1=("within_1", "mean"),
        )
    )
    cheaper = (
        frame[frame["cheaper"]]
        .groupby("corpus")
        .agg(n_cheaper=("k", "size"), cheaper_within_1=("cheap_within_1", "mean"))
    )
    table = per_corpus.join(settled).join(cheaper).reset_index()
    totals = {
        "corpus": "all", "draws": len(frame), "pick_within_2": frame["within_2"].mean(),
        "mean_lost": frame["lost"].mean(), "settled": frame["settled"].mean(),
        "cheap_within_1": frame["cheap_within_1"].mean(), "cheaper_named": frame["cheaper"].mean(),
        "n_settled": int(frame["settled"].sum()),
        "settled_within_2": frame.loc[frame["settled"], "within_2"].mean(),
        "settled_within_1": frame.loc[frame["settled"], "within_1"].mean(),
        "n_cheaper": int(frame["cheaper"].sum()), "cheaper_within_1": frame.loc[frame["cheaper"], "cheap_within_1"].mean(),
    }  # fmt: skip
    table = pd.concat([table, pd.DataFrame([totals])], ignore_index=True)
    parts = ["## The few-label answer, per corpus\n", frame_markdown(table)]
    for column, words in (
        ("p_best", "chance of being the best"),
        ("p_within", "chance of being within 1 point of the best"),
    ):
        rel, ece = reliability(records, column)
        if len(rel):
            parts += [f"\n## Reliability: stated {words}, against within 1 point on all labels\n", frame_markdown(rel),
                      f"\nexpected calibration error: {ece:.3f}"]  # fmt: skip
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora", default=None, help="comma-separated; default: every classification corpus"
    )
    parser.add_argument("--models", default=None, help="comma-separated; default: the benchmark's candidates")
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.bench-emb-cache"))
    parser.add_argument(
        "--inflations",
        default=None,
        help="comma-separated spread inflations to compare (default: the product's)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also keep every draw in this JSON file")
    args = parser.parse_args(argv)
    inflations = (
        tuple(float(v) for v in args.inflations.split(","))
        if args.inflations
        else (getattr(probes, "SPREAD_INFLATION", 1.0),)
    )
    names = args.corpora.split(",") if args.corpora else classification_corpora()
    models = (
        args.models.split(",")
        if args.models
        else [m for m in default_models() if get_spec(m).role == "candidate"]
    )
    records = []
    for name in names:
        start = time.perf_counter()
        records += corpus_draws(name, models, args.cache_dir, args.draws, inflations)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(records, default=float), encoding="utf-8")
    if len(inflations) > 1:
        print(sweep(records))
    for inflation in inflations:
        print(f"\n# Spread inflation {inflation:g}\n")
        print(report([r for r in records if r["inflation"] == inflation]))
    return records


def sweep(records: list[dict]) -> str:
    """Per inflation, every corpus: the calibration error of the stated chance of being within 1 point, and
    the inflation chosen for each corpus on the others (the lowest mean error there), judged on it."""
    rows = []
    for (inflation, corpus), group in pd.DataFrame(records).groupby(["inflation", "corpus"]):
        part = group.to_dict(orient="records")
        rows.append({"inflation": inflation, "corpus": corpus, "ece_within": reliability(part, "p_within")[1],
                     "ece_best": reliability(part, "p_best")[1], "settled": group["settled"].mean(),
                     "cheap_within_1": (group["cheap_lost"] <= 1.0 + 1e-9).mean()})  # fmt: skip
    table = pd.DataFrame(rows)
    held = []
    for corpus in table["corpus"].unique():
        others = table[table["corpus"] != corpus].groupby("inflation")["ece_within"].mean()
        chosen = float(others.idxmin()) if len(others) else float(table["inflation"].iloc[0])
        row = table[(table["corpus"] == corpus) & (table["inflation"] == chosen)].iloc[0]
        held.append(
            {"held out": corpus, "chosen on the others": chosen, "ece_within there": row["ece_within"]}
        )
    wide = table.pivot_table(index="corpus", columns="inflation", values="ece_within")
    wide.columns = [f"ECE at {c:g}" for c in wide.columns]
    return "\n".join(
        ["## Calibration error of the chance of being within 1 point, per spread inflation\n",
         frame_markdown(wide.reset_index()), "\n## Chosen leave one corpus out\n", frame_markdown(pd.DataFrame(held))]
    )  # fmt: skip


if __name__ == "__main__":
    main()
