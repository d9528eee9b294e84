"""The few-label answer judged on the answer benchmark's kept embeddings: the posterior that starts from
the benchmark's prior (``choosing/accuracy_posterior.py``) against the estimate that starts from nothing
(``choosing/probes.few_label_estimates``), leave one corpus out.

For each classification corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior is
learned from the *other* corpora: the label-free rule chosen on them (among the geometric scores the
answer stage has) and its record by rank. Then seeded draws of random texts are labelled with the
corpus's own labels in batches of 16, and after each batch both estimates name a model; each pick is
judged by the oracle (5-fold logistic regression on all texts).

Prints, per k: mean points lost and share within 2 points (both estimates, and the label-free pick at
k = 0), how often the named model changes between consecutive batches, the calibration of the stated
chance of being within 2 points, how many draws are settled and how many of those are within 2 points,
and how often "n more labels would settle it" came true. ``--json`` writes every figure.

    .venv/bin/python bench/studies/few_label_prior.py --root .cache/answer-benchmark --draws 20
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.benchmark.answer_stage import judged_record  # noqa: E402
from flare_core.benchmark.embedding_store import kept_corpora  # noqa: E402
from flare_core.benchmark.posterior_draws import TOLERANCE, judge_all, per_corpus, summary  # noqa: E402

#: Every estimate judged: the product's and the alternatives it was chosen against, as (prior, reading of
#: the labels: "learned" on the other corpora, the offset line shared by every model; "learned with each
#: model's line" too, and ", shared offset" those lines dropped once learned; "learned, no offset" its
#: spreads alone; "widened" the sampling error 1.5 times as before the reading).
VARIANTS = {
    "posterior": ("benchmark", "learned"),
    "before reading": ("benchmark", "widened"),
    "each model's line": ("benchmark", "learned with each model's line"),
    "each model's line, dropped": ("benchmark", "learned with each model's line, shared offset"),
    "learned, no offset": ("benchmark", "learned, no offset"),
    "with each model's record": ("with models", "learned"),
    "flat prior": ("flat", "learned"),
}


def _nested_choice(frame: pd.DataFrame) -> pd.DataFrame:
    """For each corpus, the estimate with the fewest mean points lost (over every k) on the *other*
    corpora, and what it lost on this one at each k: the choice among the variants judged honestly."""
    judged = frame[frame["k"] > 0]
    mean = judged.groupby(["corpus", "method"])["lost"].mean().unstack()
    rows = []
    for corpus in mean.index:
        chosen = mean.drop(index=corpus).mean().idxmin()
        part = judged[(judged["corpus"] == corpus) & (judged["method"] == chosen)]
        rows.append(part.groupby("k")["lost"].mean().rename(f"{corpus}: {chosen}"))
    table = pd.concat(rows, axis=1)
    return table.assign(mean=table.mean(axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpora", default="", help="comma-separated; default every kept classification corpus"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--variants", default="", help="names of VARIANTS, separated by ; (default: all)")
    parser.add_argument(
        "--ship",
        action="store_true",
        help="write the product's few-label record and reading (answer_suite.few_label_block, 10 draws) into "
        "the shipped answer benchmark and its docs page instead of judging the variants",
    )
    args = parser.parse_args()
    root = Path(args.root)
    names = [n for n in args.corpora.split(",") if n] or kept_corpora(root, "classification")
    start = time.perf_counter()
    records = {n: judged_record(root, n, seed=args.seed) for n in names}
    print(f"judged {len(records)} corpora in {time.perf_counter() - start:.0f} s", flush=True)
    if args.ship:
        _ship(root, records, args.seed)
        return
    wanted = [v for v in args.variants.split(";") if v] or list(VARIANTS)
    frame = judge_all(str(root), records, args.draws, args.seed, {v: VARIANTS[v] for v in wanted})
    print(f"drawn and judged in {time.perf_counter() - start:.0f} s", flush=True)
    result = summary(frame)
    corpora = per_corpus(frame).round(2)
    nested = _nested_choice(frame)
    by_k = pd.DataFrame(result["by_k"]).pivot(index="k", columns="method", values="mean_lost").round(2)
    within = pd.DataFrame(result["by_k"]).pivot(index="k", columns="method", values="within").round(2)
    print(f"mean points lost by k (label-free pick: {result['label_free']['mean_lost']:.2f})")
    print("before any label:", json.dumps(result["before_labels"], default=float))
    print(by_k.to_string())
    print(f"share within {TOLERANCE:g} points by k (label-free: {result['label_free']['within']:.2f})")
    print(within.to_string())
    for key in ("stability", "settled", "forecast", "coverage"):
        print(key, json.dumps(result[key], default=float))
    print("calibration", {m: round(c["overall"], 3) for m, c in result["calibration"].items()})
    print(corpora.to_string())
    print("the estimate chosen leave one corpus out (fewest points lost over k on the others), by k:")
    print(nested.round(2).to_string())
    if args.json:
        args.json.write_text(json.dumps({"summary": result, "per_corpus": corpora.reset_index().to_dict(
            orient="records")}, indent=1, default=float))  # fmt: skip


def _ship(root: Path, records: dict, seed: int) -> None:
    """The shipped answer benchmark with its few-label record and reading made again from the kept corpora
    (its corpora's records as shipped), and its docs page printed from it."""
    from flare_core.answer.shipped import SHIPPED_ANSWER_RESULTS
    from flare_core.benchmark.answer_suite import FEW_LABEL_DRAWS, few_label_block, update_docs
    from flare_core.store import atomic

    shipped = json.loads(SHIPPED_ANSWER_RESULTS.read_text(encoding="utf-8"))
    block = few_label_block(str(root), records, FEW_LABEL_DRAWS, seed)
    if block is None:
        raise SystemExit("no kept classification corpus to judge")
    shipped["few_labels"] = block
    atomic.write_json(SHIPPED_ANSWER_RESULTS, shipped)
    update_docs(Path(__file__).resolve().parents[2] / "docs" / "answer-benchmark.md", shipped)
    print(
        json.dumps({k: v for k, v in block.items() if k not in ("per_corpus", "calibration")}, default=float)
    )


if __name__ == "__main__":
    main()
