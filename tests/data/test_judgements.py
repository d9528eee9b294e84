"""Search judgements read from real files: the forms people keep them in, and every bad input stopped with
a message that says where."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.data.corpus import load_corpus
from flare_core.data.judgements import document_ids, load_judgements
from flare_core.errors import CorpusError

DOCS = ["d1", "d2", "d3", "d4"]


def _write(path, text: str, encoding: str = "utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_graded_judgements_with_query_texts(tmp_path):
    qrels = _write(
        tmp_path / "qrels.csv",
        "query_id,query,doc_id,relevance\nq1,how to reset a password,d2,2\nq1,how to reset a password,d3,1\n"
        "q1,how to reset a password,d4,0\nq2,billing address,d1,1\n",
    )
    out = load_judgements(qrels, DOCS)
    assert out.columns.tolist() == ["query_id", "query_text", "doc_row", "relevance"]
    assert out["relevance"].tolist() == [2, 1, 0, 1] and out["doc_row"].tolist() == [1, 2, 3, 0]
    assert out.loc[out["query_id"] == "q2", "query_text"].item() == "billing address"


def test_trec_qrels_with_a_queries_file(tmp_path):
    qrels = _write(tmp_path / "qrels.txt", "q1 0 d2 2\nq1 0 d3 1\nq2 0 d1 1\n")
    queries = _write(
        tmp_path / "queries.tsv", "query_id\tquery\nq1\treset password\nq2\tbilling\nq3\tunused\n"
    )
    out = load_judgements(qrels, DOCS, queries=queries)
    assert out["query_text"].tolist() == ["reset password", "reset password", "billing"]
    assert out["relevance"].tolist() == [2, 1, 1]
    # BEIR's spellings: query-id, corpus-id, score; queries as JSON lines with _id and text
    beir = _write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td4\t1\n")
    jsonl = _write(tmp_path / "queries.jsonl", '{"_id": "q1", "text": "reset password"}\n')
    assert load_judgements(beir, DOCS, queries=jsonl)["doc_row"].tolist() == [3]


def test_query_text_as_its_id(tmp_path):
    qrels = _write(tmp_path / "judged.csv", "query,doc_id,relevance\nreset password,d1,1\nbilling,d2,3\n")
    out = load_judgements(qrels, DOCS)
    # each query gets an id of its own, so that its text is kept in the text column only
    assert out["query_id"].tolist() == ["q1", "q2"]
    assert out["query_text"].tolist() == ["reset password", "billing"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "query_id,query,doc_id,relevance\nq1,a,d9,1\nq1,a,d1,1\n",
            "1 document that is not among the 4 documents",
        ),
        ("query_id,query,doc_id,relevance\nq1,a,d1,0\nq1,a,d2,0\nq2,b,d1,1\n", "no relevant document.*'q1'"),
        (
            "query_id,query,doc_id,relevance\nq1,a,d1,1\nq1,a,d2,1\nq1,a,d1,2\n",
            "more than once \\(data rows 1, 3\\)",
        ),
        ("query_id,query,doc_id,relevance\nq1,a,d1,high\n", "row 1 has the relevance 'high'"),
        ("query_id,query,doc_id,relevance\nq1,a,d1,0.5\n", "whole numbers"),
        ("query_id,query,doc_id,relevance\nq1,a,d1,1\nq1,b,d2,1\n", "two different texts"),
        ("query_id,query,doc_id,relevance\nq1,,d1,1\n", "no query text"),
        ("query_id,doc_id,relevance\nq1,d1,1\n", "--queries"),
        ("query,document\na,b\n", "needs the columns query_id"),
        ("q1 0 d1 1\nq1 0 d2\n", "line 2 is not 'query_id iteration doc_id relevance'"),
    ],
)
def test_bad_judgements_are_stopped(tmp_path, text, words):
    with pytest.raises(CorpusError, match=words):
        load_judgements(_write(tmp_path / "qrels.csv", text), DOCS)


def test_a_judgements_file_that_is_not_utf8(tmp_path):
    qrels = _write(tmp_path / "qrels.csv", "query,doc_id,relevance\ncafé crème,d1,1\n", encoding="cp1252")
    with pytest.raises(CorpusError, match="is not UTF-8"):
        load_judgements(qrels, DOCS)


def test_query_ids_without_text_in_the_queries_file(tmp_path):
    qrels = _write(tmp_path / "qrels.csv", "query_id,doc_id,relevance\nq1,d1,1\nq2,d2,1\n")
    queries = _write(tmp_path / "queries.csv", "query_id,query\nq1,reset password\n")
    with pytest.raises(CorpusError, match="1 judged query has no text in 'queries.csv', e.g. 'q2'"):
        load_judgements(qrels, DOCS, queries=queries)


def test_document_ids_follow_the_kept_texts(tmp_path):
    frame = pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["first text here", "", "third text here"]})
    frame.to_csv(tmp_path / "docs.csv", index=False)
    corpus = load_corpus(tmp_path / "docs.csv", text_column="text", label_column=None)
    assert document_ids(tmp_path / "docs.csv", corpus) == ["a", "c"]  # the empty text is not kept
    with pytest.raises(CorpusError, match="no column 'key'"):
        document_ids(tmp_path / "docs.csv", corpus, "key")
    pd.DataFrame({"name": ["a", "b"], "text": ["x y", "y z"]}).to_csv(tmp_path / "plain.csv", index=False)
    plain = load_corpus(tmp_path / "plain.csv", text_column="text", label_column=None)
    with pytest.raises(CorpusError, match="no id column"):
        document_ids(tmp_path / "plain.csv", plain)
    pd.DataFrame({"id": ["a", "a"], "text": ["x y", "y z"]}).to_csv(tmp_path / "twice.csv", index=False)
    twice = load_corpus(tmp_path / "twice.csv", text_column="text", label_column=None)
    with pytest.raises(CorpusError, match="the id 'a' on 2 rows"):
        document_ids(tmp_path / "twice.csv", twice)
