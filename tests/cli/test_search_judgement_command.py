"""``flare label`` for search: queries (typed, and drafted from the corpus) out with their pooled documents as
a CSV, judgements back in, the updated answer printed; bad judgement files refused with a message and
nothing saved. Real static models embed the queries."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from flare_core.answer import few_judgements as fj
from flare_core.cli import main
from flare_core.data.corpus import load_corpus
from flare_core.data.demo import bbc_news_frame
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store.runs import RunStore
from tests.support import embeddings_params, flare_here


@pytest.fixture
def search_run(tmp_path):
    """A finished label-free run of 30 articles (6 per topic) for search, by two static models."""
    articles = bbc_news_frame(n_per_topic=6, seed=1)
    articles[["text"]].to_csv(tmp_path / "articles.csv", index=False)
    corpus = load_corpus(tmp_path / "articles.csv", text_column="text")
    params = dataclasses.replace(embeddings_params(), geometry=False, use="search")
    run = create_run(RunStore(tmp_path / "runs"), corpus, params)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    return run, articles["label"].to_numpy()


def _judge(todo: pd.DataFrame, topics, typed_topic: str, run) -> pd.DataFrame:
    """Relevant: a document of the topic of the one the query was drafted from (or ``typed_topic``)."""
    queries = fj.load_search_judgements(run).queries.set_index("query_id")
    wanted = {q: topics[r] if r >= 0 else typed_topic for q, r in queries["known_item_row"].items()}
    return todo.assign(
        relevant=[int(topics[r] == wanted[q]) for q, r in zip(todo["query_id"], todo["doc_row"], strict=True)]
    )


@pytest.mark.slow
def test_queries_out_judgements_in_the_answer_printed(tmp_path, search_run):
    run, topics = search_run
    runs = run.path.parent
    out = flare_here("label", run.id, "--query", "football match and the league", "--next-queries", "3",
                "-o", str(tmp_path / "todo.csv"), runs_dir=runs)  # fmt: skip
    assert "3 queries" in out.stderr and "written to" in out.stderr
    todo = pd.read_csv(tmp_path / "todo.csv", keep_default_na=False)
    assert list(todo.columns) == ["query_id", "query", "doc_row", "text", "relevant"]
    assert list(dict.fromkeys(todo["query_id"])) == ["q1", "q2", "q3"] and (todo["relevant"] == "").all()
    assert todo.loc[todo["query_id"] == "q1", "query"].iloc[0] == "football match and the league"
    sources = fj.load_search_judgements(run).queries["source"].tolist()
    assert sources == ["typed", "suggested", "suggested"]
    _judge(todo, topics, "sport", run).to_csv(tmp_path / "judged.csv", index=False)
    out = flare_here("label", run.id, str(tmp_path / "judged.csv"), "--json", runs_dir=runs)
    verdict = json.loads(out.stdout)
    assert f"{len(todo)} judgements read; 3 queries judged in all" in out.stderr
    assert verdict["basis"] == "few labels" and verdict["few_labels"]["metric"] == "ndcg@10"
    assert verdict["few_labels"]["n_labels"] == 3 and verdict["headline"].endswith("too few to judge by yet.")
    shown = json.loads(flare_here("show", run.id, "--json", runs_dir=runs).stdout)
    assert shown["labels"]["words"].startswith("3 search queries judged (3 with a relevant document)")
    assert shown["verdict"]["recommended"] == verdict["recommended"]


def test_bad_judgement_files_are_refused_and_change_nothing(tmp_path, search_run, capsys):
    run, topics = search_run
    runs = str(run.path.parent)
    assert (
        main(["label", run.id, "--next-queries", "2", "-o", str(tmp_path / "todo.csv"), "--runs-dir", runs])
        == 0
    )
    todo = _judge(pd.read_csv(tmp_path / "todo.csv", keep_default_na=False), topics, "sport", run)
    first = todo["query_id"] == "q1"
    outside = next(r for r in range(30) if r not in set(todo.loc[first, "doc_row"]))
    cases = {
        "latin.csv": (
            todo.assign(query=todo["query"] + " café").to_csv(index=False).encode("cp1252"),
            "is not UTF-8",
        ),
        "grade.csv": (todo.assign(relevant=2).to_csv(index=False).encode(), "relevant is 1 (relevant) or 0"),
        "outside.csv": (
            pd.concat([todo, todo[first].head(1).assign(doc_row=outside, text="")])
            .to_csv(index=False)
            .encode(),
            f"document row {outside} is not among the documents pooled for it",
        ),
        "unknown.csv": (todo.assign(doc_row=999, text="").to_csv(index=False).encode(), "is not in this run"),
        "twice.csv": (
            todo.assign(query_id="q1").to_csv(index=False).encode(),  # q2's rows given q1's id
            "gives query id 'q1' two different queries",
        ),
        "other run.csv": (
            todo.assign(query="another query").to_csv(index=False).encode(),
            "its query q1 reads",
        ),
        "blank.csv": (todo.assign(relevant="").to_csv(index=False).encode(), "has no judgement to read"),
    }
    for name, (data, words) in cases.items():
        (tmp_path / name).write_bytes(data)
        code = main(["label", run.id, "--judgements", str(tmp_path / name), "--runs-dir", runs])
        err = capsys.readouterr().err
        assert code == 2 and words in err, (name, err)
        assert not run.has(*fj.JUDGED)
    # a query with no relevant document is read, kept and said
    none = todo.assign(relevant=0)
    none.to_csv(tmp_path / "none.csv", index=False)
    assert main(["label", run.id, str(tmp_path / "none.csv"), "--runs-dir", runs]) == 0
    err = capsys.readouterr().err
    assert "query q1 has no document marked relevant: it is kept, but does not count until one is" in err
    assert fj.load_search_judgements(run).no_relevant == ["q1", "q2"]
