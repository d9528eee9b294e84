"""Score the stored search benchmark runs again with the product's current query embeddings, then judge
the benchmark again, without training any density again.

Usage::

    python bench/studies/rescore_search_runs.py --runs-dir RUNS [--json before_after.json]

For each retrieval corpus of ``RUNS/benchmark/benchmark.json`` it runs the run's downstream stage again
(every model embeds the queries with :func:`flare_core.encoders.encode_queries` and ranks the run's stored
document embeddings), then the labels' comparison and the verdict, as a run does after its embeddings;
the embeddings, the IS matrices and the baselines stay as they were. Then ``rejudge_benchmark`` judges
every corpus again. It prints each model's mean nDCG@10 before and after, per corpus, and the benchmark's
ρ of every label-free score with nDCG@10 before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer.search_labels import QUERY_SCORES  # noqa: E402
from flare_core.answer.write import write_verdict  # noqa: E402
from flare_core.benchmark.suite import TABLE_SCORES, load_benchmark, rejudge_benchmark, spearman_of  # noqa: E402
from flare_core.run.baseline_stages import downstream_stage  # noqa: E402
from flare_core.run.labels_stage import comparison_stage  # noqa: E402
from flare_core.run.params import RunParams  # noqa: E402
from flare_core.store.runs import RunStore  # noqa: E402


def _ndcg(run) -> pd.Series:
    frame = run.load_frame(*QUERY_SCORES)
    return frame.groupby("model")["ndcg_at_10"].mean()


def _rho(result: dict) -> dict[str, dict[str, float | None]]:
    return {
        record["corpus"]: {score: spearman_of(record, score) for score in TABLE_SCORES}
        for record in result["corpora"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    store = RunStore(args.runs_dir)
    before_result = load_benchmark(store)
    if before_result is None:
        raise SystemExit(f"no benchmark in {args.runs_dir}")
    out: dict = {"ndcg": {}, "rho_before": _rho(before_result)}
    for record in before_result["corpora"]:
        run = store.get(record["run_id"])
        if not run.has(*QUERY_SCORES):
            continue
        before = _ndcg(run)
        params = RunParams.from_dict(run.manifest["params"])
        ok = [m["id"] for m in run.manifest["models"] if m["status"] == "done"]
        downstream_stage(run, ok, None, params, lambda *a, **k: None)
        comparison_stage(run, None)
        write_verdict(run, provisional=False)
        after = _ndcg(run)
        table = pd.DataFrame({"before": before, "after": after}).round(4)
        out["ndcg"][record["corpus"]] = table.to_dict(orient="index")
        print(f"\n{record['corpus']}: mean nDCG@10 per model\n{table.to_string()}", flush=True)
    after_result = rejudge_benchmark(store, progress=lambda line: print(line, flush=True))
    out["rho_after"] = _rho(after_result)
    for corpus in out["ndcg"]:
        print(f"\n{corpus}: ρ with nDCG@10, before → after")
        for score in TABLE_SCORES:
            b, a = out["rho_before"][corpus][score], out["rho_after"][corpus][score]
            print(f"  {score:15s} {b if b is None else round(b, 2)} → {a if a is None else round(a, 2)}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
