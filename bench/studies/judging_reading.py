"""Study: what one search query asks a person to read on *Check with a few searches*.

A label-free search run of BBC News articles (``--per-topic`` per topic, five topics) with three static
candidates is made in a temporary store; five typed queries and five drafted from the corpus are added as
the page adds them. For each query it prints how many documents the candidates pooled (every top 10) and
how many the page asks for (:meth:`~flare_core.answer.few_judgements.SearchJudgements.shown`), and the words
a person reads: every pooled document whole, against the passages the page shows first
(:func:`~flare_core.view.passages.passage`).

Usage::

    .venv/bin/python bench/studies/judging_reading.py [--per-topic 10]
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
from flare_core.data.corpus import load_corpus  # noqa: E402
from flare_core.data.demo import bbc_news_frame  # noqa: E402
from flare_core.run import jobs  # noqa: E402
from flare_core.run.create import create_run  # noqa: E402
from flare_core.run.params import RunParams  # noqa: E402
from flare_core.store.runs import RunStore  # noqa: E402
from flare_core.view.passages import passage  # noqa: E402

TYPED = (
    "the football team won the match",
    "the election and the prime minister",
    "new mobile phone software",
    "film awards and box office",
    "shares fell as profits dropped",
)
MODELS = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-topic", type=int, default=10, help="articles per topic (five topics)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "articles.csv"
        bbc_news_frame(n_per_topic=args.per_topic, seed=0)[["text"]].to_csv(path, index=False)
        quiet = {"collapse": False, "concentration": False, "maps": False, "geometry": False}
        params = RunParams(models=MODELS, estimators=[], controls=[], validation=[], use="search", **quiet)
        run = create_run(RunStore(Path(folder) / "runs"), load_corpus(path, text_column="text"), params)
        if jobs.run_in_process(run) != "done":
            raise SystemExit(f"the run failed: {run.manifest.get('traceback')}")
        drafts = from_judgements.draft_queries(run, 5, fj.load_search_judgements(run))["query"].tolist()
        ids = fj.add_queries(run, [*TYPED, *drafts])
        judged = fj.load_search_judgements(run)
        texts = run.corpus_frame()["text"].astype(str)
        print("| query | pooled | asked for | words, whole pool | words, passages asked for |")
        print("|---|---|---|---|---|")
        whole, read = [], []
        for query in ids:
            pool, shown = judged.pool(query), judged.shown(query)
            whole.append(sum(len(texts[r].split()) for r in pool))
            read.append(sum(len(passage(texts[r], judged.text(query))[0].split()) for r in shown))
            print(
                f"| {judged.text(query)[:50]} | {len(pool)} | {len(shown)} | {whole[-1]:,} | {read[-1]:,} |"
            )
        print(
            f"\nmean words a query: whole pool {statistics.mean(whole):,.0f}, passages {statistics.mean(read):,.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
