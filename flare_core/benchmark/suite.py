"""The validity benchmark: the product's own runs on labelled public corpora, judged by the labels.

For each corpus of :mod:`flare_core.data.benchmark_corpora` the benchmark makes an ordinary run (the
labels go in so the run's downstream page can show them, but nothing label-free reads them), then
computes, from the run's stored embeddings and independently of the run's analyses:

- the oracle: 5-fold logistic-regression accuracy per model (classification corpora), the Spearman
  correlation of pair cosines with human similarity scores (the Lee corpus), or the mean nDCG@10 over
  the queries of a retrieval corpus (each model ranks the run's texts for its own embedding of each
  query; the run embeds the queries with every model, as a run with search judgements does);
  classification corpora are judged a second time by 10-nearest-neighbour accuracy on the same folds;
- the label-free baselines (:func:`flare_core.choosing.validity.baseline_scores`), without labels;
- how well each label-free score (flow IS, mixture IS, each baseline) orders the candidates like the
  oracle, and the points lost by following the verdict instead of the oracle's best candidate.

Layout under the run store::

    <runs>/benchmark/benchmark.json     every corpus's record (see :func:`evaluate_run`)
    <runs>/benchmark/corpora/<name>.csv the corpus as the run read it
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.search_labels import QUERY_SCORES
from flare_core.answer.stored import load_verdict
from flare_core.benchmark.pools import pool_judgements
from flare_core.checks import check_int
from flare_core.choosing.retrieval_eval import METRICS
from flare_core.choosing.validity import (
    agreement,
    baseline_scores,
    judgement_map,
    oracle_scores,
    regret_points,
    retrieval_oracle,
)
from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, BenchmarkCorpus, load_benchmark_corpus
from flare_core.run.params import RunParams, build_params
from flare_core.store import atomic
from flare_core.store.manifest import model_kind, roles
from flare_core.store.runs import Run, RunStore

BENCHMARK_VERSION = 1
#: Texts are cut at this many tokens in benchmark runs (the product's default is 256), to keep the runs
#: short. It cuts 79% of the Lee documents, 21% of the debate statements and at most 0.2% of the other
#: corpora's texts; at 256 tokens the transformers' oracle scores move by under 0.5 points on Lee and gain
#: up to 2 points on the debates, where TF-IDF stays the best candidate (``bench/studies/label_free_scores.py
#: --max-length 256`` embeds them so).
BENCHMARK_MAX_LENGTH = 128
#: The label-free scores compared in the summary table, in its column order.
TABLE_SCORES = ("flow", "gmm", "dim", "effective_rank", "uniformity")


def benchmark_dir(store: RunStore) -> Path:
    """``<runs>/benchmark``."""
    return Path(store.root) / "benchmark"


def default_models() -> list[str]:
    """Every available built-in model that a run ranks (candidates and partial models)."""
    from flare_core.encoders import is_available, list_models

    return [s.id for s in list_models() if s.role in ("candidate", "partial") and is_available(s.id)]


def benchmark_params(models: Sequence[str], *, seed: int = 0, **overrides: Any) -> RunParams:
    """The parameters of a benchmark run: the product's defaults (controls, the preset's whitened width,
    both estimators, the validation studies) without the token-level stages and the maps."""
    options: dict[str, Any] = {"maps": False, "max_length": BENCHMARK_MAX_LENGTH, "seed": seed}
    options.update(overrides)
    return build_params(models=list(models), estimator="both", collapse=False, **options)


def corpus_sample(bench: BenchmarkCorpus, max_texts: int | None) -> BenchmarkCorpus:
    """The first ``max_texts`` texts of ``bench`` (its rows are already a seeded sample) and the pairs
    or judgements among them (a query keeps the relevant documents that remain; one with none left is
    dropped); ``bench`` itself when ``max_texts`` is None or not smaller."""
    check_int(max_texts, "max_texts", min_value=10, allow_none=True)
    if max_texts is None or max_texts >= len(bench.frame):
        return bench
    pairs = judgements = None
    if bench.pairs is not None:
        keep = (bench.pairs["i"] < max_texts) & (bench.pairs["j"] < max_texts)
        pairs = bench.pairs[keep].reset_index(drop=True)
    if bench.judgements is not None:
        judgements = bench.judgements[bench.judgements["doc_row"] < max_texts]
        answered = judgements.groupby("query_id")["relevance"].transform("max") > 0
        judgements = judgements[answered].reset_index(drop=True)
        if judgements.empty:
            raise ValueError(
                f"{bench.name}: no query keeps a relevant document among the first {max_texts} texts"
            )
    frame = bench.frame.head(max_texts).reset_index(drop=True)
    return dataclasses.replace(bench, frame=frame, pairs=pairs, judgements=judgements)


def make_run(store: RunStore, bench: BenchmarkCorpus, params: RunParams) -> Run:
    """Create the queued run of ``bench``: its texts (and labels) written to a CSV and read back as a
    user's upload would be."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run.create import create_run

    folder = benchmark_dir(store) / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bench.name}.csv"
    labelled = bench.oracle == "classification"
    frame = bench.frame if labelled else bench.frame[["text"]]
    atomic.write_text(path, frame.to_csv(index=False))
    corpus = load_corpus(
        path, text_column="text", label_column="label" if labelled else None, pair_columns=None
    )
    if len(corpus) != len(bench.frame):
        raise RuntimeError(f"{bench.name}: the run read {len(corpus)} of {len(bench.frame)} texts")
    # a retrieval corpus's judgements go in as a person's would: the run embeds the queries with every model
    return create_run(store, corpus, params, name=f"benchmark {bench.name}", judgements=bench.judgements)


def evaluate_run(run: Run, bench: BenchmarkCorpus, *, seed: int = 0) -> dict[str, Any]:
    """The benchmark record of a finished run of ``bench``.

    Keys: ``corpus``, ``task``, ``oracle`` (its name), ``n_texts``, ``run_id``, ``candidates``,
    ``controls``, ``table`` (model → oracle value, each label-free score, role), ``agreement`` (one row
    per label-free score over the candidates: Spearman with interval, Kendall), ``verdict`` (recommended,
    leading, trust level), ``regret`` (points lost by the recommendation, by the leader, and by the top
    model of each baseline), ``controls_outrank`` (control → how many candidates its flow IS exceeds).
    """
    role_of = roles(run)
    done = [m["id"] for m in run.manifest["models"] if m.get("status") == "done"]
    embeddings = {m: np.asarray(run.load_embeddings(m)) for m in done}
    if bench.oracle == "retrieval":
        oracle_frame = query_oracle(run, bench.judgements, embeddings)
        oracle_name = "ndcg_at_10"
    elif bench.pairs is None:
        oracle_frame = oracle_scores(embeddings, labels=bench.frame["label"].tolist(), seed=seed)
        oracle_name = "accuracy"
    else:
        oracle_frame = oracle_scores(embeddings, pairs=bench.pairs, seed=seed)
        oracle_name = "sts_spearman"
    oracle = oracle_frame[oracle_name]
    table = baseline_scores(embeddings, seed=seed)
    for estimator in ("flow", "gmm"):
        parts = [
            run.load_frame("sufficiency", estimator, name).set_index("model")["score"]
            for name in ("scores.parquet", "controls.parquet")
            if run.has("sufficiency", estimator, name)
        ]
        if parts:
            table[estimator] = pd.concat(parts)
        table = table.join(_score_variants(run, estimator))
    candidates = [m for m in done if role_of.get(m) == "candidate"]
    controls = [m for m in done if role_of.get(m) == "control"]
    verdict = load_verdict(run) or {}
    agree = agreement(table, oracle, candidates, seed=seed)
    second = _knn_judgement(oracle_frame, table, candidates, verdict, seed)
    regret = {
        "recommended": regret_points(oracle, verdict.get("recommended"), candidates),
        "leading": regret_points(oracle, verdict.get("leading"), candidates),
    }
    for column in table.columns:
        top = table.loc[candidates, column].idxmax() if table.loc[candidates, column].notna().any() else None
        regret[f"top_{column}"] = regret_points(oracle, top, candidates)
    outrank = {}
    if "flow" in table:
        for control in controls:
            flow = table["flow"]
            outrank[control] = int((flow.loc[candidates] < flow.loc[control]).sum())
    rows = table.assign(oracle=oracle, role=[role_of.get(m, "candidate") for m in table.index])
    if "knn_accuracy" in oracle_frame:
        rows = rows.assign(oracle_knn=oracle_frame["knn_accuracy"], oracle_vmeasure=oracle_frame["v_measure"])
    if oracle_name == "ndcg_at_10":
        rows = rows.assign(oracle_recall=oracle_frame["recall_at_10"], oracle_mrr=oracle_frame["mrr_at_10"])
    return {
        "corpus": bench.name,
        "task": bench.task,
        "source": bench.source,
        "oracle": oracle_name,
        "n_texts": int(run.manifest["corpus"]["n_texts"]),
        **({} if bench.judgements is None else {"n_queries": int(bench.judgements["query_id"].nunique())}),
        "run_id": run.id,
        "candidates": candidates,
        "controls": controls,
        "best": str(oracle.loc[candidates].idxmax()),
        "table": _records(rows.rename_axis("model").reset_index()),
        "agreement": _records(agree),
        "verdict": {
            "recommended": verdict.get("recommended"),
            "basis": verdict.get("basis"),
            "leading": verdict.get("leading"),
            "trust": (verdict.get("trust") or {}).get("level"),
            "headline": verdict.get("headline"),
        },
        "regret": regret,
        "controls_outrank": outrank,
        "knn": second,
        "pools": pool_judgements(run, rows, candidates, controls, seed),
    }


def query_oracle(run: Run, judgements: pd.DataFrame, embeddings: dict[str, np.ndarray]) -> pd.DataFrame:
    """Each model's mean ``ndcg_at_10``, ``recall_at_10`` and ``mrr_at_10`` over the queries of
    ``judgements`` (index: the models of ``embeddings``, the run's stored embeddings of the documents).

    A model's figures are read from the per-query scores the run stored (its downstream stage embedded
    the queries with the model's encoder and ranked the documents); a model without them there has its
    encoder embed the queries now. Neither reads the run's answer or its comparison of the candidates."""
    n_queries = judgements["query_id"].nunique()
    stored = run.load_frame(*QUERY_SCORES) if run.has(*QUERY_SCORES) else pd.DataFrame(columns=["model"])
    rows: dict[str, dict[str, float]] = {}
    missing = []
    for model in embeddings:
        part = stored[stored["model"] == model]
        if len(part) == n_queries:
            rows[model] = {metric: float(part[metric].mean()) for metric in METRICS}
        else:
            missing.append(model)
    if missing:
        encoded = _encode_queries(run, judgements, missing)
        if encoded:
            found = retrieval_oracle(encoded, {m: embeddings[m] for m in encoded}, judgements)
            rows.update(found.to_dict(orient="index"))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(METRICS)).reindex(list(embeddings))


def _encode_queries(run: Run, judgements: pd.DataFrame, models: Sequence[str]) -> dict[str, np.ndarray]:
    """Each of ``models``' encoder's embeddings of the distinct queries (in :func:`judgement_map`'s
    order); a model without an encoder (precomputed embeddings) is left out."""
    from flare_core import encoders

    params = RunParams.from_dict(run.manifest["params"])
    _, rows = judgement_map(judgements)
    texts = judgements.drop_duplicates("query_id").set_index("query_id")["query_text"]
    queries = [str(texts.loc[q]) for q in sorted(rows, key=rows.get)]
    corpus = run.corpus_frame()["text"].tolist()
    out = {}
    for model in models:
        if model_kind(run, model) == "precomputed":
            continue
        encoder = encoders.load_encoder(model, device=params.device, corpus_texts=corpus)
        out[model] = np.asarray(encoders.encode_queries(encoder, queries, batch_size=params.batch_size))
    return out


def _knn_judgement(
    oracle_frame: pd.DataFrame, table: pd.DataFrame, candidates: list[str], verdict: dict[str, Any], seed: int
) -> dict[str, Any] | None:
    """The same judgement with 10-nearest-neighbour accuracy as the oracle (classification corpora; None
    for similarity data): a second probe of the labels that, unlike logistic regression, does not get more
    parameters from a wider embedding. Keys: ``best``, ``agreement`` (as in the record), ``leading``
    (points lost by the verdict's leader)."""
    if "knn_accuracy" not in oracle_frame:
        return None
    knn = oracle_frame["knn_accuracy"]
    scores = table[[s for s in TABLE_SCORES if s in table]]
    return {
        "best": str(knn.loc[candidates].idxmax()),
        "agreement": _records(agreement(scores, knn, candidates, seed=seed)),
        "leading": regret_points(knn, verdict.get("leading"), candidates),
    }


def _score_variants(run: Run, estimator: str) -> pd.DataFrame:
    """Every aggregation and variant of ``estimator``'s IS scores (``all_scores.parquet``) as columns
    named ``"<estimator>:<variant>"``, e.g. ``"flow:is_mean_norm"``; empty when the stage did not run."""
    if not run.has("sufficiency", estimator, "all_scores.parquet"):
        return pd.DataFrame()
    variants = run.load_frame("sufficiency", estimator, "all_scores.parquet").set_index("model")
    variants = variants.drop(columns=["n_targets"], errors="ignore")
    return variants.add_prefix(f"{estimator}:")


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with NaN written as None (valid JSON)."""
    return [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        for row in frame.astype(object).to_dict(orient="records")
    ]


def run_benchmark(
    store: RunStore,
    corpora: Sequence[str] | None = None,
    *,
    models: Sequence[str] | None = None,
    max_texts: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    label_draws: int = 30,
    add: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Run and judge the product on ``corpora`` (default: all); writes and returns ``benchmark.json``.

    ``label_draws``: seeded draws per k of the few-label simulation (0 leaves the labels' tables out);
    ``add``: keep the stored benchmark's other corpora (it must have the same models and parameters), so
    that a benchmark can be run one corpus at a time; ``overrides`` are :class:`RunParams` fields of every
    run (tests use a fast flow preset)."""
    from flare_core.run import jobs

    names = list(corpora or BENCHMARK_CORPORA)
    unknown = sorted(set(names) - set(BENCHMARK_CORPORA))
    if unknown:
        raise ValueError(f"unknown benchmark corpora {unknown}: choose from {sorted(BENCHMARK_CORPORA)}")
    chosen = list(models) if models else default_models()
    params = benchmark_params(chosen, seed=seed, **overrides)
    folder = benchmark_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    settings = {**{k: v for k, v in vars(params).items() if k != "models"}, "label_draws": label_draws}
    kept: list[dict[str, Any]] = []
    stored = load_benchmark(store) if add else None
    if stored is not None:
        if stored["models"] != chosen or stored["params"] != json.loads(json.dumps(settings)):
            raise ValueError(
                f"the benchmark in {folder} was made with other models or parameters: add corpora to it with "
                "the same ones, or run it anew in another --runs-dir"
            )
        kept = [r for r in stored["corpora"] if r["corpus"] not in names]
    records: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    for name in names:
        bench = corpus_sample(load_benchmark_corpus(name, seed=seed), max_texts)
        run = make_run(store, bench, params)
        if progress:
            progress(f"{name}: run {run.id} on {len(bench.frame)} texts")
        start = time.perf_counter()
        status = jobs.run_in_process(run)
        if status != "done":
            raise RuntimeError(f"{name}: benchmark run {run.id} ended {status}: {run.manifest.get('error')}")
        record = evaluate_run(run, bench, seed=seed)
        record["labels"] = _labels_judged(run, bench, record, seed, label_draws)
        record["seconds"] = round(time.perf_counter() - start, 1)
        records.append(record)
        every = kept + records
        result = {
            "version": BENCHMARK_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "complete": len(records) == len(names),
            "models": chosen,
            "params": settings,
            "corpora": every,
            "summary": summarise(every),
        }
        # written after every corpus, so a long benchmark that stops keeps what it finished
        atomic.write_json(folder / "benchmark.json", result)
    return result


def _labels_judged(
    run: Run, bench: BenchmarkCorpus, record: dict[str, Any], seed: int, draws: int
) -> dict[str, Any] | None:
    """The answer's judgement by the labels of a classification corpus (None for similarity or retrieval
    data, or with ``draws`` 0): see :func:`flare_core.benchmark.answer_tables.label_tables`."""
    from flare_core.benchmark.answer_tables import label_tables

    if bench.oracle != "classification" or not draws:
        return None
    return label_tables(run, bench.frame["label"].tolist(), record["candidates"], seed=seed, draws=draws)


def rejudge_benchmark(
    store: RunStore, progress: Callable[[str], None] | None = None, *, label_draws: int | None = None
) -> dict[str, Any]:
    """Judge the stored benchmark runs of ``store`` again, without running them; rewrites and returns
    ``benchmark.json``. For a change in how runs are judged (a new score, variant or baseline): the
    runs, their IS estimates and timings stay as they were. ``label_draws`` defaults to the benchmark's
    own (30 for one made before it was recorded)."""
    result = load_benchmark(store)
    if result is None:
        raise FileNotFoundError(f"no benchmark in {benchmark_dir(store)}; run `flare benchmark` first")
    if label_draws is None:
        label_draws = int(result["params"].get("label_draws", 30))
    seed = int(result["params"].get("seed", 0))
    records = []
    for old in result["corpora"]:
        run = store.get(old["run_id"])
        bench = corpus_sample(load_benchmark_corpus(old["corpus"], seed=seed), old["n_texts"])
        texts = run.corpus_frame()["text"].tolist()
        if texts != bench.frame["text"].tolist():
            raise RuntimeError(
                f"{old['corpus']}: run {run.id} holds other texts than the benchmark corpus of this "
                "version; run `flare benchmark` again"
            )
        if progress:
            progress(f"{old['corpus']}: judging run {run.id} again")
        record = evaluate_run(run, bench, seed=seed)
        record["labels"] = _labels_judged(run, bench, record, seed, label_draws)
        records.append({**record, "seconds": old.get("seconds")})
    result = {**result, "corpora": records, "summary": summarise(records)}
    atomic.write_json(benchmark_dir(store) / "benchmark.json", result)
    return result


def load_benchmark(store: RunStore) -> dict[str, Any] | None:
    """The stored ``benchmark.json`` of ``store``, or None when the benchmark has not been run."""
    return _read_json(benchmark_dir(store) / "benchmark.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def agreement_row(record: dict[str, Any], score: str) -> dict[str, Any] | None:
    """The row of a corpus ``record``'s agreement table for ``score`` (None when it was not judged)."""
    return next((row for row in record["agreement"] if row["score"] == score), None)


def spearman_of(record: dict[str, Any], score: str) -> float | None:
    """The Spearman correlation of ``score`` with the oracle on a corpus ``record`` (None when not judged)."""
    row = agreement_row(record, score)
    return None if row is None else row["spearman"]


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def score_summary(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per label-free score judged on every corpus of ``records`` (each IS aggregation and
    variant, each baseline): mean and lowest Spearman, mean Kendall, the mean points lost by following
    its top candidate, and on how many corpora that top candidate is the oracle's best. Sorted by mean
    Spearman, best first."""
    scores = [row["score"] for row in records[0]["agreement"]] if records else []
    rows = []
    for score in scores:
        agree = [agreement_row(r, score) for r in records]
        if any(a is None for a in agree):
            continue
        spearman = _finite([a["spearman"] for a in agree])
        lost = _finite([r["regret"].get(f"top_{score}") for r in records])
        rows.append(
            {
                "score": score,
                "mean_spearman": finite_mean(spearman),
                "lowest_spearman": min(spearman) if spearman else None,
                "mean_kendall": float(np.mean(_finite([a["kendall"] for a in agree]) or [np.nan])),
                "mean_points_lost_by_top": finite_mean(lost),
                "top_is_best_on": sum(v == 0.0 for v in lost),
            }
        )
    frame = pd.DataFrame(rows)
    return frame.sort_values("mean_spearman", ascending=False, ignore_index=True) if rows else frame


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over corpora: each score's Spearman with the oracle (``scores``: every score and variant,
    see :func:`score_summary`; ``mean_spearman_knn``: with the kNN oracle), the regret of the verdict, the
    label-free choice per use judged leave one corpus out (``label_free``) and what each ground of the
    answer lost (``trust_levels``)."""
    from flare_core.benchmark.answer_tables import label_free_summary, trust_levels

    label_free = label_free_summary(list(records))
    return {
        "label_free": label_free,
        "trust_levels": trust_levels(list(records), label_free),
        "mean_spearman": _mean_spearman(records),
        "mean_spearman_knn": _mean_spearman([r["knn"] for r in records if r.get("knn")]),
        "scores": _records(score_summary(records)),
        "mean_regret_leading": finite_mean([r["regret"]["leading"] for r in records]),
        "recommended_on": sum(r["verdict"]["recommended"] is not None for r in records),
        "corpora": len(records),
        "control_recommended": sum(r["verdict"]["recommended"] in r["controls"] for r in records),
    }


def finite_mean(values: Sequence[float | None]) -> float | None:
    """The mean of the finite ``values``, or None when there is none."""
    finite = _finite(values)
    return float(np.mean(finite)) if finite else None


def _mean_spearman(judged: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Each of :data:`TABLE_SCORES` → its mean Spearman over ``judged`` (records, or their kNN parts)."""
    return {score: finite_mean([spearman_of(r, score) for r in judged]) for score in TABLE_SCORES}
