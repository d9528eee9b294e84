"""Speed of one update after a judged search query: 10 models x 2,000 documents, the judgements stored with
the run and the answer written (``add_judgements`` + ``write_verdict``), as the page and ``flare label`` do.

A finished run of seeded Gaussian embeddings (the widths of the built-in pool, with a topic signal) is
built once; queries are added with their embeddings given (as the stored query embeddings are after a
query is added, so no model runs), then the pooled documents of one more query are judged and the answer
rewritten, and the time of that update is printed with its parts (pooling a new query, the estimate
alone). Nothing is asserted: the figures are read against the 2 s the answer may take.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python bench/speed/few_judgement_speed.py [--docs 2000] [--models 10] [--queries 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer import few_judgements as fj  # noqa: E402
from flare_core.answer import from_judgements
from flare_core.answer.write import write_verdict  # noqa: E402
from flare_core.data.corpus import load_corpus  # noqa: E402
from flare_core.run import jobs  # noqa: E402
from flare_core.run.create import create_run  # noqa: E402
from flare_core.run.params import RunParams  # noqa: E402
from flare_core.store.runs import RunStore  # noqa: E402

WIDTHS = (384, 768, 384, 384, 50, 64, 256, 100, 384, 768)


def build(folder: Path, n_docs: int, n_models: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    topics = rng.integers(0, 20, n_docs)
    arrays = {}
    for i in range(n_models):
        d = WIDTHS[i % len(WIDTHS)]
        centres = rng.normal(size=(20, d))
        arrays[f"model-{i}"] = (centres[topics] * (0.3 + 0.1 * i) + rng.normal(size=(n_docs, d))).astype(
            np.float32
        )
    pd.DataFrame({"text": [f"document {i} of topic {t}. More words." for i, t in enumerate(topics)]}).to_csv(
        folder / "docs.csv", index=False
    )
    params = RunParams(models=[], estimators=[], controls=[], collapse=False, concentration=False, maps=False,
                       validation=[], geometry=False, use="search")  # fmt: skip
    run = create_run(RunStore(folder / "runs"), load_corpus(folder / "docs.csv", text_column="text"), params,
                     precomputed=arrays)  # fmt: skip
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")

    def encode(model: str, texts):
        rows = [int(t.split()[1]) for t in texts]
        return arrays[model][rows]

    return run, encode, topics


def judge(run, query_ids, topics) -> list:
    judged = fj.load_search_judgements(run)
    out = []
    for query in query_ids:
        topic = topics[int(judged.text(query).split()[1])]
        out += [(query, row, int(topics[row] == topic)) for row in judged.pool(query)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run, encode, topics = build(Path(tmp), args.docs, args.models)
        print(f"run built in {time.perf_counter() - t0:.1f} s ({args.models} models x {args.docs} documents)")
        texts = [f"document {i} of topic" for i in range(args.queries + 1)]
        ids = fj.add_queries(run, texts[:-1], encode=encode)
        fj.add_judgements(run, judge(run, ids, topics))
        write_verdict(run)
        t0 = time.perf_counter()
        (last,) = fj.add_queries(run, texts[-1:], encode=encode)
        pooled = time.perf_counter() - t0
        pool = len(fj.load_search_judgements(run).pool(last))
        t0 = time.perf_counter()
        fj.add_judgements(run, judge(run, [last], topics))
        saved = time.perf_counter() - t0
        t0 = time.perf_counter()
        block = from_judgements.few_search_block(run)
        estimate = time.perf_counter() - t0
        t0 = time.perf_counter()
        verdict = write_verdict(run)
        answer = time.perf_counter() - t0
        update = saved + answer
        print(f"pooling one new query (its embeddings given): {pooled:.3f} s, {pool} documents pooled")
        print(f"one update after judged query {block['n_labels']}: {update:.3f} s "
              f"(saving its {pool} judgements {saved:.3f} s, writing the answer {answer:.3f} s, of which the "
              f"estimate alone {estimate:.3f} s); {update / 2.0:.2f} of the 2 s allowed")  # fmt: skip
        print(verdict["headline"])


if __name__ == "__main__":
    main()
