"""A few search judgements decide a label-free run: queries pooled over the candidates in one shuffled list,
judged relevant or not, nDCG@10 on the judged pools (unjudged documents not relevant) checked by hand and
against trec_eval's own code, the answer updated after each batch from one estimate, the judgements kept
with the run, in its bundles and its report; bad judgements refused with nothing saved."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from flare_core.answer import few_judgements as fj
from flare_core.answer import from_judgements
from flare_core.answer.write import write_verdict
from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore


def _run(tmp_path, texts: list[str], arrays: dict[str, np.ndarray], use: str = "search"):
    """A finished label-free run of ``texts`` with the embeddings ``arrays`` (model -> (N, d))."""
    path = tmp_path / "corpus.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text")
    params = RunParams(models=[], estimators=[], controls=[], collapse=False, concentration=False, maps=False,
                       validation=[], geometry=False, use=use)  # fmt: skip
    run = create_run(RunStore(tmp_path / "runs"), corpus, params, precomputed=arrays)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    return run


def _arc(order: list[int]) -> np.ndarray:
    """2-D embeddings of 14 documents on an arc: the document at ``order[j]`` is the j-th nearest to (1, 0)."""
    out = np.zeros((14, 2), dtype=np.float32)
    for j, row in enumerate(order):
        out[row] = [math.cos(0.1 * j), math.sin(0.1 * j)]
    return out


def _tiny(tmp_path):
    """14 documents; model "a" finds 0, 1, 2, … for the query (1, 0), model "b" finds 13, 12, 11, …"""
    arrays = {"a": _arc(list(range(14))), "b": _arc(list(range(13, -1, -1)))}
    run = _run(tmp_path, [f"document {i}" for i in range(14)], arrays)

    def encode(model: str, texts):
        return np.tile([1.0, 0.0], (len(texts), 1))

    return run, encode


def test_ndcg_on_a_judged_pool_by_hand_and_by_trec_eval(tmp_path):
    run, encode = _tiny(tmp_path)
    (query,) = fj.add_queries(run, ["where is the document"], encode=encode)
    judged = fj.load_search_judgements(run)
    pool = judged.pool(query)
    # the union of both top 10s (0-9 and 4-13), shuffled: the order does not say which model found which
    assert sorted(pool) == list(range(14)) and pool != sorted(pool) and pool != sorted(pool, reverse=True)
    assert judged.pool(query) == fj.load_search_judgements(run).pool(query)  # the same order on a restart
    # 1, 5 and 12 relevant, 0 and 2 not; every other document is left unjudged (so: not relevant)
    fj.add_judgements(run, [(query, 1, 1), (query, 5, "1"), (query, 12, 1.0), (query, 0, 0), (query, 2, "0")])
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    by_hand = {
        "a": (1 / math.log2(3) + 1 / math.log2(7)) / ideal,  # finds 1 at rank 2 and 5 at rank 6
        "b": (1 / math.log2(3) + 1 / math.log2(10)) / ideal,  # finds 12 at rank 2 and 5 at rank 9
    }
    qrel = {"q": {f"d{r}": g for r, g in {1: 1, 5: 1, 12: 1, 0: 0, 2: 0}.items()}}
    runs = {"a": list(range(10)), "b": list(range(13, 3, -1))}
    for model, ranked in runs.items():
        trec = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut_10"}).evaluate(
            {"q": {f"d{r}": float(10 - i) for i, r in enumerate(ranked)}}
        )
        assert trec["q"]["ndcg_cut_10"] == pytest.approx(by_hand[model], abs=1e-9)
    block = from_judgements.few_search_block(run)
    rows = {r["model"]: r for r in block["estimates"]}
    # one judged query updates the flat prior (every model alike: 50 ± 10 points, a level ± 20 shared) by
    # Jeffreys' per-query spread (a quarter, independent across models) widened 1.5 times, worked out as
    # the Gaussian update m0 + P (P + R)⁻¹ (y - m0)
    y = np.array([by_hand["a"], by_hand["b"]])
    p, r = 0.1**2 * np.eye(2) + 0.2**2, 1.5**2 * 0.25 * np.eye(2)
    mean = 0.5 + p @ np.linalg.solve(p + r, y - 0.5)
    assert [rows[m]["estimate"] for m in "ab"] == pytest.approx(mean, abs=1e-9)
    # one query cannot make anything certain: wide intervals, no chance of 0 or 1
    for row in rows.values():
        assert row["ci_high"] - row["ci_low"] > 0.3 and 0.05 < row["p_best"] < 0.95
    assert block["metric"] == "ndcg@10" and block["n_labels"] == 1 and block["n_judgements"] == 5
    verdict = write_verdict(run)
    assert verdict["basis"] == "few labels" and verdict["recommended"] == "a" and not verdict["settled"]
    assert verdict["headline"] == "Provisionally a: 1 judged query is too few to judge by yet."
    assert "100%" not in verdict["summary"] + verdict["details"] and "not measured yet" in verdict["summary"]
    assert "counts as not relevant (the usual rule when only some documents are judged)" in verdict["details"]


def _planted(tmp_path, seed: int = 0):
    """60 texts in 3 topics and three "models" of them (clear, blurred, noise); a query about text i is
    embedded by each model near text i's own embedding, and the texts of i's topic are relevant."""
    rng = np.random.default_rng(seed)
    codes = np.arange(60) % 3
    centres = rng.normal(size=(3, 16)) * 4.0
    arrays = {
        "clear": centres[codes] + rng.normal(size=(60, 16)),
        "blurred": centres[codes] * 0.12 + rng.normal(size=(60, 16)),
        "noise": rng.normal(size=(60, 24)),
    }
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    texts = [f"text number {i} about topic {codes[i]}. More words follow here." for i in range(60)]
    run = _run(tmp_path, texts, arrays)

    def encode(model: str, queries):
        rows = [int(q.split()[2]) for q in queries]
        return arrays[model][rows] + 0.1 * np.random.default_rng(rows).normal(
            size=(len(rows), arrays[model].shape[1])
        )

    return run, encode, codes


def _judge_all(run, query_ids, codes):
    """Judge every pooled document of ``query_ids``: relevant when of the query's topic."""
    judged = fj.load_search_judgements(run)
    batch = []
    for query in query_ids:
        topic = codes[int(judged.text(query).split()[2])]
        batch += [(query, row, int(codes[row] == topic)) for row in judged.pool(query)]
    return fj.add_judgements(run, batch, source="page")


def test_judged_queries_update_the_answer_and_survive_a_restart_and_a_bundle(tmp_path):
    from flare_core.store.bundle import export_run
    from flare_core.store.bundle_import import import_run
    from flare_core.view.report import build_report

    run, encode, codes = _planted(tmp_path)
    # drafted queries: a document's first sentence, marked with the document it was drafted from
    drafted = from_judgements.draft_queries(run, 3)
    assert len(drafted) == 3 and drafted["known_item_row"].nunique() == 3
    for query, row in zip(drafted["query"], drafted["known_item_row"], strict=True):
        assert query == f"text number {row} about topic {codes[row]}."
    chances = []
    for step in range(7):  # settled from 20 judged queries
        ids = from_judgements.next_queries(run, 3, encode=encode)
        assert len(ids) == 3 and not set(ids) & set(fj.load_search_judgements(run).judged)
        _judge_all(run, ids, codes)
        verdict = write_verdict(run)
        chances.append({r["model"]: r["p_best"] for r in verdict["few_labels"]["estimates"]})
        assert verdict["few_labels"]["n_labels"] == 3 * (step + 1)
    assert verdict["recommended"] == "clear" and verdict["basis"] == "few labels" and verdict["settled"]
    assert verdict["headline"].startswith(
        "Use clear: after 21 judged queries it has a chance of over 99% of being within 2 points of search "
        "quality (nDCG@10)"
    )  # the run's tolerance
    assert len({tuple(sorted(c.items())) for c in chances}) > 1  # the chances changed as queries were judged
    rows = {r["model"]: r for r in verdict["few_labels"]["estimates"]}
    assert rows["clear"]["estimate"] > rows["noise"]["estimate"]
    queries = fj.load_search_judgements(run).queries
    assert set(queries["source"]) == {"suggested"} and (queries["known_item_row"] >= 0).all()
    # a typed query joins the queries to judge
    (typed,) = fj.add_queries(run, ["text number 7 about topic 1."], encode=encode)
    assert fj.add_queries(run, ["  text number 7   about topic 1. "], encode=encode) == [
        typed
    ]  # asked before
    assert from_judgements.next_queries(run, 1, encode=encode) == [typed]
    # a restart reads everything back: the same answer from the stored query embeddings, nothing embedded
    again = RunStore(run.path.parent).get(run.id)
    assert write_verdict(again)["few_labels"]["estimates"] == verdict["few_labels"]["estimates"]
    # the report counts them; a bundle carries them; a bundle without texts drops the queries' texts
    report = build_report(run)
    assert "Search judgements given to this run: 21 search queries judged" in report
    bundle = export_run(run, tmp_path / "b.zip")
    imported = import_run(RunStore(tmp_path / "other"), bundle)
    assert fj.load_search_judgements(imported).latest() == fj.load_search_judgements(run).latest()
    assert write_verdict(imported)["few_labels"]["estimates"] == verdict["few_labels"]["estimates"]
    stripped = import_run(
        RunStore(tmp_path / "third"), export_run(run, tmp_path / "s.zip", include_texts=False)
    )
    kept = fj.load_search_judgements(stripped)
    assert kept.text("q1") == "" and kept.latest() == fj.load_search_judgements(run).latest()
    assert write_verdict(stripped)["few_labels"]["estimates"] == verdict["few_labels"]["estimates"]


def test_bad_judgements_are_refused_and_change_nothing(tmp_path):
    run, encode, codes = _planted(tmp_path)
    (query,) = fj.add_queries(run, ["text number 4 about topic 1."], encode=encode)
    pool = fj.load_search_judgements(run).pool(query)
    outside = next(r for r in range(60) if r not in pool)
    fj.add_judgements(run, [(query, pool[0], 1)])
    before = fj.load_search_judgements(run).entries.copy()
    cases = [
        ([(query, 60, 1)], "is not in this run (its corpus has 60 texts)"),
        ([(query, outside, 1)], f"document row {outside} is not among the documents pooled for it"),
        ([(query, pool[1], 2)], "relevant is 1 (relevant) or 0 (not relevant), got 2"),
        ([(query, pool[1], "yes")], "got 'yes'"),
        ([(query, pool[1], 0.5)], "got 0.5"),
        ([(query, "1.5", 1)], "is not a whole row number"),
        ([("q9", pool[1], 1)], "query 'q9' is not one of this run's queries (q1)"),
        ([(query, pool[1], 1), (query, pool[1], 0)], "is judged both relevant and not relevant"),
        ([(query, pool[1], 1), (query, pool[2], 3)], "got 3"),  # one bad row: the whole batch is refused
    ]
    for batch, words in cases:
        with pytest.raises(ValueError, match="no judgement was saved") as caught:
            fj.add_judgements(run, batch)
        assert words in str(caught.value), (batch, str(caught.value))
        pd.testing.assert_frame_equal(fj.load_search_judgements(run).entries, before)
    for text, words in [("   ", "cannot be empty"), ("x" * 1001, "at most 1000 characters")]:
        with pytest.raises(ValueError, match=words):
            fj.add_queries(run, [text], encode=encode)
    assert fj.load_search_judgements(run).ids == [query]
    # a query with no relevant document is allowed, kept, and said; it does not count
    (other,) = fj.add_queries(run, ["text number 9 about topic 0."], encode=encode)
    fj.add_judgements(run, [(other, row, 0) for row in fj.load_search_judgements(run).pool(other)])
    verdict = write_verdict(run)
    assert verdict["few_labels"]["n_labels"] == 1 and verdict["few_labels"]["no_relevant"] == [other]
    assert (
        f"1 judged query has no document marked relevant ({other}): kept, but not counted."
        in verdict["details"]
    )
    # the same batch saved twice is recorded once
    judged = fj.load_search_judgements(run)
    assert fj.add_judgements(run, [(query, pool[0], 1)]).entries.equals(judged.entries)


def test_a_judgements_file_is_read_with_its_checks(tmp_path):
    run, encode, codes = _planted(tmp_path)
    ids = from_judgements.next_queries(run, 2, encode=encode)
    todo = fj.pooled_documents(run, ids)
    assert list(todo.columns) == ["query_id", "query", "doc_row", "text", "relevant"]
    assert (todo["relevant"] == "").all()
    judged = fj.load_search_judgements(run)
    texts = run.corpus_frame()["text"].tolist()
    todo["relevant"] = [
        int(codes[r] == codes[int(q.split()[2])]) for q, r in zip(todo["query"], todo["doc_row"], strict=True)
    ]
    todo.loc[0, "relevant"] = None  # a blank cell is left unjudged
    good = fj.read_judgements_file(
        todo.to_csv(index=False).encode(), name="j.csv", judged=judged, texts=texts
    )
    assert len(good) == len(todo) - 1
    bad = {
        "latin.csv": (
            todo.assign(query=todo["query"] + " café").to_csv(index=False).encode("cp1252"),
            "is not UTF-8",
        ),
        "columns.csv": (
            todo.drop(columns="relevant").to_csv(index=False).encode(),
            "has no column 'relevant'",
        ),
        "texts.csv": (
            todo.assign(text="another text").to_csv(index=False).encode(),
            "not a judgements file of this run",
        ),
        "twice.csv": (
            todo.assign(query=np.where(np.arange(len(todo)) == 1, "something else", todo["query"]))
            .to_csv(index=False)
            .encode(),
            "two different queries",
        ),
    }
    for name, (data, words) in bad.items():
        with pytest.raises(ValueError, match=words):
            fj.read_judgements_file(data, name=name, judged=judged, texts=texts)


def test_the_search_answer_reads_the_run_s_tolerance():
    from flare_core.choosing.retrieval_eval import few_judgement_estimates
    from flare_core.choosing.stopping import search_stopping_advice

    rng = np.random.default_rng(0)
    ndcg = {"a": rng.uniform(0.5, 1.0, 24)}
    ndcg["b"] = np.clip(ndcg["a"] - rng.normal(0.02, 0.05, 24), 0, 1)  # 2 points behind, give or take
    scores = {m: pd.DataFrame({"query": [f"q{i}" for i in range(24)], "ndcg_at_10": v,
                               "recall_at_10": v, "mrr_at_10": v}) for m, v in ndcg.items()}  # fmt: skip
    one, five = (
        few_judgement_estimates(scores, seed=0, tolerance_points=t).set_index("model") for t in (1.0, 5.0)
    )
    assert one.attrs["tolerance_points"] == 1.0 and five.attrs["tolerance_points"] == 5.0
    # the same draws, a wider tolerance: b is more often good enough, and the words say which tolerance
    assert five.loc["b", "p_within"] > one.loc["b", "p_within"]
    gaps = 100 * (ndcg["a"] - ndcg["b"])
    # the judgements' gap, shrunk towards the prior's none: positive, below the mean of the queries' gaps
    assert 0 < five.loc["b", "gap"] < gaps.mean() and five.loc["b", "gap"] > 0.5 * gaps.mean()
    words = search_stopping_advice(five.reset_index(), 24)["text"]
    assert "5 nDCG@10 points" in words and "1 nDCG@10 point" not in words


def test_a_query_asks_for_the_top_documents_within_fifteen_and_all_when_asked(tmp_path):
    """Three models whose top 10s are apart (30 documents): each asks for its top 5, 15 in all; the whole
    pool of 30 when the person asks for all; a query is judged once the 15 it asked for are."""

    def arc(order: list[int]) -> np.ndarray:
        out = np.zeros((30, 2), dtype=np.float32)
        for j, row in enumerate(order):
            out[row] = [math.cos(0.1 * j), math.sin(0.1 * j)]
        return out

    order = list(range(30))
    arrays = {m: arc(order[10 * i :] + order[: 10 * i]) for i, m in enumerate("abc")}
    run = _run(tmp_path, [f"document {i}" for i in range(30)], arrays)
    (query,) = fj.add_queries(run, ["where"], encode=lambda m, texts: np.tile([1.0, 0.0], (len(texts), 1)))
    judged = fj.load_search_judgements(run)
    assert sorted(judged.pool(query)) == order  # every top 10 is pooled
    shown = judged.shown(query)
    assert sorted(shown) == [*range(5), *range(10, 15), *range(20, 25)]
    assert shown == [r for r in judged.pool(query) if r in shown]  # in the pool's shuffled order
    assert judged.shown(query, every=True) == judged.pool(query)
    assert fj.pooled_documents(run, [query])["doc_row"].tolist() == shown
    assert len(fj.pooled_documents(run, [query], every=True)) == 30
    fj.add_judgements(run, [(query, row, int(row == 3)) for row in shown])
    assert fj.load_search_judgements(run).pending() == []  # judged: the 15 it asked for are


def test_a_pool_kept_before_the_ranks_shows_whole(tmp_path):
    run, encode = _tiny(tmp_path)
    (query,) = fj.add_queries(run, ["where is the document"], encode=encode)
    pools = run.load_frame(*fj.POOLS)
    run.save_frame(pools.drop(columns="rank"), *fj.POOLS)  # as an older version wrote it
    judged = fj.load_search_judgements(run)
    assert judged.shown(query) == judged.pool(query) and len(judged.pool(query)) == 14
