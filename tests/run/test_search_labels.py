"""Search judgements decide the answer: query,document pairs and graded judgements files, through the real
pipeline with real (static) models; bad judgements stop the run before anything is written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core import encoders
from flare_core.answer.search_labels import QUERY_SCORES
from flare_core.answer.stored import load_verdict
from flare_core.choosing.downstream import retrieval
from flare_core.data.corpus import load_corpus
from flare_core.data.judgements import JUDGEMENTS, document_ids, load_judgements
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store.runs import RunStore
from flare_core.view.results import labels_words
from tests.support import STATIC, embeddings_params, flare, write_judged_files


def _mean_ndcg(
    model: str, queries: list[str], documents: list[str], qrels: dict[int, dict[int, int]], doc_emb=None
) -> float:
    """The oracle's own nDCG@10 (independent of the answer's code) of ``model`` embedding the queries (and,
    without ``doc_emb``, the documents) anew."""
    encoder = encoders.load_encoder(model, device="cpu", corpus_texts=documents)
    docs = encoder.encode(documents) if doc_emb is None else doc_emb
    return retrieval(encoder.encode(queries), docs, qrels, k=10)["ndcg_at_10"]


def test_query_document_pairs_decide_by_ndcg(tmp_path, articles):
    # each query is the first sentence of an article, its document the rest; two queries ask twice, so a
    # query is one query with every document of its rows relevant
    sentences = articles["text"].str.split(". ", n=1, regex=False)
    frame = pd.DataFrame({"query": sentences.str[0], "document": sentences.str[1]})
    frame.loc[[3, 7], "query"] = frame.loc[[2, 6], "query"].to_numpy()
    frame.to_csv(tmp_path / "qd.csv", index=False)
    corpus = load_corpus(tmp_path / "qd.csv", text_column="document")
    run = create_run(RunStore(tmp_path / "runs"), corpus, embeddings_params())
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    verdict = load_verdict(run)
    assert verdict["basis"] == "labels" and verdict["settled"]
    block = verdict["labels"]
    assert block["metric"] == "ndcg@10" and block["n_labels"] == 28  # 30 rows, two queries asked twice
    # the best model by nDCG@10 over the queries, checked against the oracle's own code on fresh embeddings
    queries = frame["query"].drop_duplicates().tolist()
    documents = sorted(set(frame["document"]))
    qrels = {queries.index(q): {documents.index(d): 1 for d in frame.loc[frame["query"] == q, "document"]}
             for q in queries}  # fmt: skip
    oracle = {m: _mean_ndcg(m, queries, documents, qrels) for m in STATIC}
    rows = {r["model"]: r for r in block["rows"]}
    for model in STATIC:
        assert rows[model]["ndcg_at_10"] == pytest.approx(oracle[model], abs=1e-6)
        assert 0 <= rows[model]["recall_at_10"] <= 1 and 0 <= rows[model]["mrr_at_10"] <= 1
    assert verdict["recommended"] == max(oracle, key=oracle.get)
    top = rows[verdict["recommended"]]
    assert verdict["headline"].startswith(
        f"Use {verdict['recommended']}: nDCG@10 of {100 * top['ndcg_at_10']:.1f} (out of 100) on your search queries"
    )
    assert "recall@10" in verdict["summary"] and "MRR@10" in verdict["summary"]
    other = next(r for r in block["rows"] if r["model"] != verdict["recommended"])
    assert other["gap_low"] <= other["gap"] <= other["gap_high"]
    assert ("tied with" in verdict["headline"]) == other["tied"]
    # the per-model figures say the same numbers as the answer
    downstream = run.load_frame("downstream.parquet").set_index("model")
    for model in STATIC:
        assert downstream.loc[model, "ndcg_at_10"] == pytest.approx(rows[model]["ndcg_at_10"])
    assert labels_words(run.manifest["corpus"]) != "none"
    assert not _texts_in_bundle(run, tmp_path / "no-texts.zip", queries)


def test_graded_judgements_decide(tmp_path, articles):
    write_judged_files(tmp_path, articles)
    corpus = load_corpus(tmp_path / "docs.csv", text_column="text", label_column=None, pair_columns=None)
    judgements = load_judgements(
        tmp_path / "qrels.tsv", document_ids(tmp_path / "docs.csv", corpus), queries=tmp_path / "queries.csv"
    )
    run = create_run(RunStore(tmp_path / "runs"), corpus, embeddings_params(), judgements=judgements)
    assert run.load_frame(JUDGEMENTS)["relevance"].tolist() == [2, 1] * 12
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    verdict = load_verdict(run)
    assert verdict["basis"] == "labels" and verdict["labels"]["metric"] == "ndcg@10"
    assert verdict["labels"]["n_labels"] == 12 and verdict["labels"]["n_judgements"] == 24
    # graded: the stored per-query figures are the oracle's own graded nDCG@10 of the corpus's embeddings
    scores = run.load_frame(*QUERY_SCORES)
    texts = corpus.texts
    qrels = {}
    for q, row, grade in judgements[["query_id", "doc_row", "relevance"]].itertuples(index=False):
        qrels.setdefault(int(q[1:]), {})[int(row)] = int(grade)
    query_texts = judgements.drop_duplicates("query_id")["query_text"].tolist()
    # the documents as the run embedded them (cut to the run's max_length), the queries embedded anew
    oracle = {m: _mean_ndcg(m, query_texts, texts, qrels, run.load_embeddings(m)) for m in STATIC}
    for model in STATIC:
        assert scores.loc[scores["model"] == model, "ndcg_at_10"].mean() == pytest.approx(
            oracle[model], abs=1e-6
        )
    assert verdict["recommended"] == max(oracle, key=oracle.get)
    assert labels_words(run.manifest["corpus"]) == "search judgements of 12 queries"
    # a bundle without texts holds no query text either
    assert not _texts_in_bundle(run, tmp_path / "no-texts.zip", query_texts)


def _texts_in_bundle(run, path, texts: list[str]) -> list[str]:
    """The members of ``run``'s bundle without texts that hold one of ``texts``."""
    import io
    import zipfile

    from flare_core.store.bundle import export_run

    found = []
    with zipfile.ZipFile(export_run(run, path, include_texts=False)) as bundle:
        for name in bundle.namelist():
            data = bundle.read(name)
            if name.endswith(".parquet"):
                frame = pd.read_parquet(io.BytesIO(data))
                cells = {str(v) for column in frame.columns for v in frame[column].tolist()}
                held = any(text in cells for text in texts)
            else:
                held = any(text.encode() in data for text in texts)
            if held:
                found.append(name)
    return found


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda q: pd.concat([q, pd.DataFrame([["q0", "doc-999", 1]], columns=q.columns)]),
            "not among the 30",
        ),
        (
            lambda q: q.assign(relevance=np.where(q["query_id"] == "q3", 0, q["relevance"])),
            "no relevant document",
        ),
        (lambda q: pd.concat([q, q.iloc[[4]]]), "more than once"),
    ],
)
def test_bad_judgements_stop_the_run_before_it_is_written(tmp_path, articles, change, words):
    _, qrels = write_judged_files(tmp_path, articles)
    change(qrels).to_csv(tmp_path / "qrels.tsv", sep="\t", index=False)
    runs = tmp_path / "runs"
    args = ("run", str(tmp_path / "docs.csv"), "--models", ",".join(STATIC), "--text-col", "text")
    proc = flare(*args, "--qrels", str(tmp_path / "qrels.tsv"), "--queries", str(tmp_path / "queries.csv"),
                 runs_dir=runs, check=False)  # fmt: skip
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert not runs.exists() or list(runs.iterdir()) == []


def test_new_run_form_checks_uploaded_judgements(tmp_path, articles):
    from flare_core.run.inputs import preview_table
    from flare_core.run.precheck import id_column, precheck_judgements

    _, qrels = write_judged_files(tmp_path, articles)
    frame, _, _ = preview_table((tmp_path / "docs.csv").read_bytes(), name="docs.csv", max_bytes=10**8)
    corpus = load_corpus(tmp_path / "docs.csv", text_column="text", label_column=None, pair_columns=None)
    assert id_column(frame.columns) == "doc_id"
    upload = ("qrels.tsv", (tmp_path / "qrels.tsv").read_bytes())
    queries = ("queries.csv", (tmp_path / "queries.csv").read_bytes())
    check, judged = precheck_judgements(frame, corpus, doc_id_column="doc_id", qrels=upload, queries=queries)
    assert check.level == "ok" and check.message.startswith("24 judgements of 12 queries")
    assert [f"doc-{row}" for row in judged["doc_row"]] == qrels["doc_id"].tolist()
    # the text column holds no ids: every judgement names an unknown document
    check, judged = precheck_judgements(frame, corpus, doc_id_column="text", qrels=upload, queries=queries)
    assert check.blocks and "not among the 30 documents" in check.message and judged is None
    check, _ = precheck_judgements(
        frame, corpus, doc_id_column="doc_id", qrels=upload, queries=queries, pair_columns=("a", "b", None)
    )
    assert check.blocks and "not both" in check.message
