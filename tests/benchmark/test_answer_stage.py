"""The answer benchmark's stage on real packaged data and real models: vectors kept on disk and read back
as computed, the oracle recomputed by scikit-learn by hand, judging again without embedding, and the
summary's leave-one-corpus-out rule on hand-made records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score

from flare_core import encoders
from flare_core.benchmark.answer_stage import judged_record, oracle_series
from flare_core.benchmark.answer_suite import answer_summary, markdown_tables
from flare_core.benchmark.embedding_store import embed_corpus, load_kept
from flare_core.data.benchmark_corpora import load_benchmark_corpus
from flare_core.data.corpus_sources import BenchmarkCorpus

MODELS = ["glove-6b-50d", "tfidf-svd-256"]


@pytest.fixture(scope="module")
def small_spam() -> BenchmarkCorpus:
    bench = load_benchmark_corpus("sms-spam", seed=0)
    frame = bench.frame.groupby("label", group_keys=False).head(40).reset_index(drop=True)
    return BenchmarkCorpus("sms-spam", bench.task, bench.description, bench.source, bench.licence, frame)


def test_kept_vectors_are_the_models_own_and_judging_again_reads_them(tmp_path, small_spam):
    took = embed_corpus(small_spam, MODELS, tmp_path)
    assert set(took) == set(MODELS) and all(s > 0 for s in took.values())
    kept = load_kept(tmp_path, "sms-spam")
    assert list(kept.embeddings) == MODELS and kept.bench.frame["text"].equals(small_spam.frame["text"])
    texts = small_spam.frame["text"].tolist()
    direct = encoders.load_encoder("glove-6b-50d").encode(texts, batch_size=32)
    np.testing.assert_allclose(kept.embeddings["glove-6b-50d"], direct, atol=1e-6)
    assert embed_corpus(small_spam, MODELS, tmp_path) == {m: 0.0 for m in MODELS}  # nothing embedded again

    record = judged_record(tmp_path, "sms-spam")
    assert record["oracle"] == "accuracy" and record["n_classes"] == 2 and record["candidates"] == MODELS
    # the oracle by hand: 5-fold logistic regression, the same seeded stratified folds
    y = small_spam.frame["label"].astype(str).to_numpy()
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    for model in MODELS:
        want = cross_val_score(LogisticRegression(max_iter=1000), kept.embeddings[model], y, cv=folds).mean()
        assert oracle_series(record)[model] == pytest.approx(want, abs=1e-9)
    path = tmp_path / "sms-spam" / "record.json"
    before = path.stat().st_mtime_ns
    assert judged_record(tmp_path, "sms-spam") == record and path.stat().st_mtime_ns == before


def test_a_record_judged_before_the_languages_were_kept_is_read_again(tmp_path, small_spam):
    embed_corpus(small_spam, MODELS, tmp_path)
    record = judged_record(tmp_path, "sms-spam")
    # text messages: English, read by the English-only model and by the one fitted on the corpus's words
    assert record["writing"] == "english" and next(iter(record["languages"]["languages"])) == "en"
    shares = {row["model"]: row["reads_corpus"] for row in record["table"]}
    assert shares["tfidf-svd-256"] == 1.0 and 0.9 <= shares["glove-6b-50d"] <= 1.0
    path = tmp_path / "sms-spam" / "record.json"
    old = {k: v for k, v in record.items() if k != "languages"}
    old["table"] = [{**row, "reads_corpus": 0.0} for row in record["table"]]
    path.write_text(json.dumps({**old, "writing": "spaced"}), encoding="utf-8")
    assert judged_record(tmp_path, "sms-spam") == record  # the reading again, nothing judged again


def test_other_texts_under_the_same_name_are_refused(tmp_path, small_spam):
    embed_corpus(small_spam, MODELS[:1], tmp_path)
    other = small_spam.frame.iloc[::-1].reset_index(drop=True)
    changed = BenchmarkCorpus("sms-spam", "", "", "", "", other)
    with pytest.raises(ValueError, match="keeps other texts"):
        embed_corpus(changed, MODELS[:1], tmp_path)
    with pytest.raises(FileNotFoundError, match="no kept embeddings"):
        load_kept(tmp_path, "no-such-corpus")


def _record(name: str, oracle: dict[str, float]) -> dict:
    dims = {"wide": 768.0, "mid": 384.0, "narrow": 64.0}
    spread = {"wide": 0.0, "mid": 1.0, "narrow": 2.0}  # uniformity orders them the other way round
    rows = [{"model": m, "dim": dims[m], "effective_rank": dims[m], "uniformity": spread[m], "oracle": oracle[m],
             "oracle_knn": oracle[m], "oracle_vmeasure": oracle[m], "role": "candidate"} for m in oracle]  # fmt: skip
    return {"corpus": name, "oracle": "accuracy", "candidates": list(oracle), "controls": [], "table": rows}


def test_summary_chooses_rules_leave_one_corpus_out_by_hand():
    records = [
        _record("a", {"wide": 0.90, "mid": 0.85, "narrow": 0.80}),
        _record("b", {"wide": 0.85, "mid": 0.80, "narrow": 0.75}),
        _record("c", {"wide": 0.66, "mid": 0.68, "narrow": 0.70}),  # the narrow model wins here by 4 points
    ]
    summary = answer_summary(records)
    rule = summary["rules"]["classifier"]
    # a or b left out: on the other two the width's ρ is 0 like uniformity's, but it loses 2 points on
    # average against uniformity's 5, so it is chosen and loses 0; c left out: the width (ρ 1 on a and b)
    # picks the wide model, 4 points behind
    assert [r["rule"] for r in rule["per_case"]] == ["dim", "dim", "dim"]
    assert rule["cases"] == 3 and rule["worst_lost"] == pytest.approx(4.0)
    assert rule["mean_lost"] == pytest.approx(4.0 / 3)
    rhos = pd.DataFrame(summary["scores"]).set_index(["use", "score"])
    assert rhos.loc[("classifier", "dim"), "mean_rho"] == pytest.approx((1 + 1 - 1) / 3)
    assert summary["control_recommended"] == 0
    text = markdown_tables({"corpora": [dict(r, task="t", n_texts=2, best="wide") for r in records],
                            "models": ["wide", "mid", "narrow"], "summary": summary})  # fmt: skip
    assert "| classifier |" in text and json.dumps(summary)  # plain JSON, as shipped


def test_the_docs_print_the_shipped_answer_benchmark():
    from pathlib import Path

    from flare_core.answer.shipped import SHIPPED_ANSWER_RESULTS
    from flare_core.benchmark.answer_suite import DOCS_END, DOCS_START

    shipped = json.loads(SHIPPED_ANSWER_RESULTS.read_text(encoding="utf-8"))
    page = (Path(__file__).resolve().parents[2] / "docs" / "answer-benchmark.md").read_text(encoding="utf-8")
    printed = page.split(DOCS_START, 1)[1].split(DOCS_END, 1)[0].strip()
    assert printed == markdown_tables(shipped).strip()
    # every corpus judged, with its source and licence; the few-label record beside the label-free pick
    assert all(r["source"] and r["licence"] for r in shipped["corpora"])
    few = shipped["few_labels"]
    assert {r["method"] for r in few["by_k"]} == {"posterior", "before reading"}
    # the reading the product ships, and the intervals' coverage measured beside their nominal level
    from flare_core.choosing.probe_reading import ProbeReading

    assert ProbeReading.from_json(few["reading"]).corpora == len(few["per_corpus"]) >= 12
    assert (
        few["coverage"]["posterior"]["nominal"] == 0.95 and 0 < few["coverage"]["posterior"]["measured"] <= 1
    )
    assert shipped["summary"]["control_recommended"] == 0


def test_the_shipped_answer_benchmark_is_wide_enough_to_learn_from():
    from flare_core.answer.shipped import SHIPPED_ANSWER_RESULTS
    from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA
    from flare_core.data.classification_corpora import GROUPING_CORPORA
    from flare_core.encoders import list_models

    shipped = json.loads(SHIPPED_ANSWER_RESULTS.read_text(encoding="utf-8"))
    records = {r["corpus"]: r for r in shipped["corpora"]}
    assert len(records) >= 24 and set(records) <= set(BENCHMARK_CORPORA)
    kinds = pd.Series({name: r["oracle"] for name, r in records.items()})
    assert (kinds == "accuracy").sum() >= 12
    assert (kinds == "sts_spearman").sum() >= 4
    known_item = {"bbc-titles", "news-titles"}  # queries made from titles: extras beyond the real ones
    assert sum(k == "ndcg_at_10" and n not in known_item for n, k in kinds.items()) >= 6
    assert sum(r.get("n_classes", 0) >= 20 for r in records.values()) >= 3
    assert set(GROUPING_CORPORA) <= set(records)
    # the whole pool on every corpus: every candidate, both controls and the partial model
    pool = {s.id for s in list_models() if s.role in ("candidate", "control", "partial")}
    for name, record in records.items():
        assert {row["model"] for row in record["table"]} == pool, name
        assert record["best"] in record["candidates"]
    assert shipped["summary"]["control_recommended"] == 0
