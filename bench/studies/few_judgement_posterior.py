"""A few search judgements judged on the answer benchmark's kept embeddings: today's paired bootstrap over
the judged queries (``choosing/retrieval_eval.few_judgement_estimates`` with
``choosing/stopping.search_stopping_advice``) against the posterior that starts from the benchmark's
prior (``choosing/accuracy_posterior.py``, per-query nDCG@10 as the scores), leave one corpus out.

For each search corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior is learned
from the *other* search corpora; seeded draws of the corpus's own queries are judged at k = 5, 10, 20 and
40, pooled as the product pools (``bench/studies/draws/search_draws.py``). Prints, per method and k: mean
nDCG@10 points lost against the oracle's best, share within 2 points, share settled, share of the
settled draws within 2 points, calibration error of the stated chance of being within 2 points and model
changes since the k before; then the same per corpus and the worst corpus. ``--json`` writes every
figure and every draw.

    .venv/bin/python bench/studies/few_judgement_posterior.py --root .cache/answer-benchmark --draws 10
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.studies.draws.search_draws import (  # noqa: E402
    PRODUCT,
    SEARCH_CORPORA,
    VARIANTS,
    judge_all,
    method_table,
    summary,
)
from flare_core.benchmark.answer_stage import judged_record  # noqa: E402


def nested_choice(rows: pd.DataFrame) -> pd.DataFrame:
    """For each corpus, the estimate (today's or a posterior) with the fewest mean points lost over every
    k on the *other* corpora, and what it lost on this one at each k: the choice judged honestly."""
    judged = rows[rows["k"] > 0]
    mean = judged.groupby(["corpus", "method"])["lost"].mean().unstack()
    out = []
    for corpus in mean.index:
        chosen = mean.drop(index=corpus).mean().idxmin()
        part = judged[(judged["corpus"] == corpus) & (judged["method"] == chosen)]
        out.append(part.groupby("k")["lost"].mean().rename(f"{corpus}: {chosen}"))
    table = pd.concat(out, axis=1)
    return table.assign(mean=table.mean(axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark", help="the kept embeddings")
    parser.add_argument("--corpora", default=",".join(SEARCH_CORPORA), help="comma-separated search corpora")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", action="store_true", help="judge the error models of VARIANTS too")
    parser.add_argument("--json", type=Path, default=None, help="write every figure and draw here")
    args = parser.parse_args()
    start = time.perf_counter()
    names = [n for n in args.corpora.split(",") if n]
    records = {n: judged_record(args.root, n) for n in names}
    rows = judge_all(
        args.root,
        records,
        args.draws,
        args.seed,
        variants={**PRODUCT, **VARIANTS} if args.variants else PRODUCT,
    )
    out = summary(rows)
    pd.set_option("display.width", 200)
    print(method_table(rows).round(3).to_string(index=False))
    print()
    print(pd.DataFrame(out["per_corpus"]).round(3).to_string(index=False))
    print()
    if args.variants:
        print(nested_choice(rows).round(2).T.to_string())
        print()
    for method, worst in out["worst_corpus"].items():
        print(f"worst corpus, {method}: {json.dumps(worst, default=str)}")
    print(f"forecast: {out['forecast']}")
    print(f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    if args.json:
        out["rows"] = json.loads(rows.to_json(orient="records"))
        args.json.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
