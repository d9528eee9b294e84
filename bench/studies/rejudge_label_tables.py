"""Judge a stored benchmark's few-label and full-label tables again, with this version's answer, on the same
embeddings: for a benchmark whose runs are no longer at hand.

Usage::

    python bench/studies/rejudge_label_tables.py BENCHMARK.json --corpora debates-2016,sms-spam [--runs-dir DIR]

``flare benchmark --rejudge`` needs the benchmark's runs. This embeds each named classification corpus again
with the benchmark's candidates, in a run of the benchmark's parameters without the estimators and the
other stages (the same texts, encoders and ``max_length``: the same embeddings), and checks that: every
candidate's oracle accuracy (5-fold logistic regression, as the benchmark judged it) must equal the stored
record's. Only then are the record's ``labels`` tables (:func:`flare_core.benchmark.answer_tables.label_tables`,
the benchmark's ``label_draws``) replaced, the summary computed again and ``BENCHMARK.json`` written; the
records' IS estimates, baselines and timings stay as they were.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from flare_core.benchmark.answer_tables import label_tables
    from flare_core.benchmark.suite import benchmark_params, make_run, summarise
    from flare_core.choosing.validity import oracle_scores
    from flare_core.data.benchmark_corpora import load_benchmark_corpus
    from flare_core.run import jobs
    from flare_core.store import atomic
    from flare_core.store.runs import RunStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", type=Path)
    parser.add_argument("--corpora", required=True)
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args()
    result = json.loads(args.benchmark.read_text(encoding="utf-8"))
    settings = result["params"]
    seed, draws = int(settings["seed"]), int(settings.get("label_draws", 30))
    store = RunStore(args.runs_dir or Path(tempfile.mkdtemp(prefix="rejudge-")))
    params = dataclasses.replace(
        benchmark_params(result["models"], seed=seed, max_length=settings["max_length"]),
        controls=[], estimators=[], geometry=False, validation=[], downstream=False,
    )  # fmt: skip
    for name in args.corpora.split(","):
        record = next(r for r in result["corpora"] if r["corpus"] == name)
        bench = load_benchmark_corpus(name, seed=seed)
        run = make_run(store, bench, params)
        if jobs.run_in_process(run) != "done":
            raise SystemExit(f"{name}: the embedding run ended {run.manifest['status']}")
        labels = bench.frame["label"].tolist()
        stored = {row["model"]: row["oracle"] for row in record["table"]}
        embeddings = {m: np.asarray(run.load_embeddings(m), dtype=np.float64) for m in record["candidates"]}
        again = oracle_scores(embeddings, labels=labels, seed=seed)["accuracy"]
        for model in record["candidates"]:
            if not np.isclose(float(again[model]), stored[model], rtol=0, atol=1e-9):
                raise SystemExit(f"{name}: {model} scores {again[model]} here, {stored[model]} stored")
        before = record["labels"]
        record["labels"] = label_tables(run, labels, record["candidates"], seed=seed, draws=draws)
        print(f"{name}: label tables judged again ({len(record['candidates'])} candidates, same embeddings)")
        if before == record["labels"]:
            print(f"{name}: unchanged")
    result["summary"] = summarise(result["corpora"])
    atomic.write_json(args.benchmark, result)


if __name__ == "__main__":
    main()
