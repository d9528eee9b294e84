"""Study: what one search query asks a person to read on *Check with a few searches*, and what judging only
those documents does to the scores.

A label-free search run of BBC News articles (``--per-topic`` per topic, five topics) with four candidates
is made in a temporary store, and ``--queries`` queries are drafted from the corpus and added as the page
adds them. Printed:

- per query, on average: the documents the candidates pooled (every top 10) and those the page asks for
  (:meth:`~flare_core.answer.few_judgements.SearchJudgements.shown`), and the words a person reads: every
  pooled document whole, against the passages the page shows first (:func:`~flare_core.view.passages.passage`);
- each candidate's mean nDCG@10 (× 100) with a document relevant when it is of the drafted query's topic,
  judged three ways: every document, every pooled document, and only the documents the page asks for
  (a document nobody judged counts as not relevant, as the product scores).

Usage::

    .venv/bin/python bench/studies/judging_reading.py [--per-topic 40] [--queries 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer import few_judgements as fj  # noqa: E402
from flare_core.answer import from_judgements  # noqa: E402
from flare_core.answer.from_labels import candidate_ids  # noqa: E402
from flare_core.choosing.retrieval_eval import per_query_scores  # noqa: E402
from flare_core.data.corpus import load_corpus  # noqa: E402
from flare_core.data.demo import bbc_news_frame  # noqa: E402
from flare_core.run import jobs  # noqa: E402
from flare_core.run.create import create_run  # noqa: E402
from flare_core.run.params import RunParams  # noqa: E402
from flare_core.store.runs import Run, RunStore  # noqa: E402
from flare_core.view.passages import passage  # noqa: E402

MODELS = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256", "paraphrase-MiniLM-L3-v2"]


def search_run(folder: Path, per_topic: int) -> tuple[Run, list[str]]:
    """A finished label-free search run of the articles, and each article's topic."""
    frame = bbc_news_frame(n_per_topic=per_topic, seed=0)
    path = folder / "articles.csv"
    frame[["text"]].to_csv(path, index=False)
    quiet = {"collapse": False, "concentration": False, "maps": False, "geometry": False}
    params = RunParams(models=MODELS, estimators=[], controls=[], validation=[], use="search", **quiet)
    run = create_run(RunStore(folder / "runs"), load_corpus(path, text_column="text"), params)
    if jobs.run_in_process(run) != "done":
        raise SystemExit(f"the run failed: {run.manifest.get('traceback')}")
    return run, frame["label"].astype(str).tolist()


def mean_ndcg(
    run: Run, judged: fj.SearchJudgements, judge: dict[str, list[int]], relevant
) -> dict[str, float]:
    """Each candidate's mean nDCG@10 (× 100) over the queries, with the documents of ``judge`` judged
    (``relevant(query, document)``: 1 or 0)."""
    rows = {q: i for i, q in enumerate(judged.ids)}
    query_emb = fj.stored_query_embeddings(run, len(judged.ids))
    out = {}
    for model in candidate_ids(run):
        given = {q: {d: relevant(q, d) for d in docs} for q, docs in judge.items()}
        given = {q: grades for q, grades in given.items() if any(grades.values())}
        scores = per_query_scores(query_emb[model], run.load_embeddings(model), given, rows)
        out[model] = 100 * float(scores["ndcg_at_10"].mean())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-topic", type=int, default=40, help="articles per topic (five topics)")
    parser.add_argument("--queries", type=int, default=30, help="queries drafted from the articles")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        run, topics = search_run(Path(folder), args.per_topic)
        drafts = from_judgements.draft_queries(run, args.queries, fj.load_search_judgements(run))
        rows = [int(r) for r in drafts["known_item_row"]]
        ids = fj.add_queries(run, drafts["query"].tolist(), source="suggested", known_items=rows)
        judged = fj.load_search_judgements(run)
        texts = run.corpus_frame()["text"].astype(str)
        whole = [sum(len(texts[r].split()) for r in judged.pool(q)) for q in ids]
        read = [sum(len(passage(texts[r], judged.text(q))[0].split()) for r in judged.shown(q)) for q in ids]
        print(f"{len(ids)} queries, {len(candidate_ids(run))} candidates, {len(texts)} articles")
        pooled = statistics.mean(len(judged.pool(q)) for q in ids)
        asked = statistics.mean(len(judged.shown(q)) for q in ids)
        print(f"documents a query: pooled {pooled:.1f}, asked for {asked:.1f}")
        print(
            f"words a query: the whole pool {statistics.mean(whole):,.0f}, passages {statistics.mean(read):,.0f}\n"
        )
        topic = {q: topics[r] for q, r in zip(ids, rows, strict=True)}
        ways = {
            "every document": {q: list(range(len(texts))) for q in ids},
            "every pooled document": {q: judged.pool(q) for q in ids},
            "the documents asked for": {q: judged.shown(q) for q in ids},
        }

        def same(query: str, doc: int) -> int:
            return int(topics[doc] == topic[query])

        table = {way: mean_ndcg(run, judged, judge, same) for way, judge in ways.items()}
        models = list(table["every document"])
        print("| judged | " + " | ".join(models) + " |\n|---|" + "---|" * len(models))
        for way, scores in table.items():
            print(f"| {way} | " + " | ".join(f"{scores[m]:.1f}" for m in models) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
