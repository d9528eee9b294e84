"""Which texts to ask for, judged with the product's few-label answer (the accuracy posterior that starts
from the benchmark's prior) on the answer benchmark's kept classification corpora, leave one corpus out.

For each classification corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior is
learned from the *other* corpora as in ``bench/studies/few_label_prior.py``; texts are chosen in batches
of 16 (up to 128) by each text choice of ``bench.studies.draws.choice_draws.METHODS`` (random: the
seeded permutation of the random-text study; diverse, contest and inform: ``next_rows``' strategies, inform
reading the benchmark's prior or a flat one), labelled with the corpus's own labels, and after each batch
the posterior names a model, judged by the oracle (5-fold logistic regression on all texts).

Prints, per text choice and k: mean points lost, share within 2 points, share settled (the leader's
chance of being within 2 points at least 0.9) and the share of those within 2 points, the named model's
mean bias (its estimate minus its oracle accuracy, points); how often the named model changes between
consecutive batches after 32 labels; the calibration error of the stated chance of being within 2 points;
mean points lost per corpus; and the text choice chosen leave one corpus out (fewest mean points lost
over k on the other corpora) with what it lost on each corpus. ``--json`` writes every figure.

    .venv/bin/python bench/studies/label_choice_posterior.py --root .cache/answer-benchmark --draws 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.studies.draws.choice_draws import (  # noqa: E402
    METHODS,
    by_k,
    judge_corpus,
    matched,
    nested_choice,
)
from flare_core.benchmark.answer_stage import judged_record  # noqa: E402
from flare_core.benchmark.embedding_store import kept_corpora  # noqa: E402
from flare_core.benchmark.posterior_draws import summary  # noqa: E402

REPORTED_KS = (16, 32, 48, 64, 128)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark")
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpora", default="", help="comma-separated; default every kept classification corpus"
    )
    parser.add_argument(
        "--methods", default="", help=f"comma-separated among {', '.join(METHODS)}; default all"
    )
    parser.add_argument("--rows", type=Path, default=None, help="write every row (a pickle) here")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--report", type=Path, default=None, help="only print the tables of these rows")
    args = parser.parse_args()
    if args.report:
        report(pd.read_pickle(args.report), args.json)
        return
    root = Path(args.root)
    names = [n for n in args.corpora.split(",") if n] or kept_corpora(root, "classification")
    methods = {m: METHODS[m] for m in args.methods.split(",") if m} or METHODS
    records = {n: judged_record(root, n, seed=args.seed) for n in names}
    rows = []
    for name in names:
        t = time.perf_counter()
        rows += judge_corpus(str(root), name, records, args.draws, args.seed, methods)
        print(f"{name}: {time.perf_counter() - t:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    if args.rows:
        frame.to_pickle(args.rows)
    report(frame, args.json)


def report(frame: pd.DataFrame, json_path: Path | None = None) -> None:
    """Print the tables of the rows ``frame`` (and write them to ``json_path``), on the cells every text
    choice reached."""
    everyone = matched(frame)
    print(
        f"{len(frame) - len(everyone)} rows left out: their (corpus, draw, k) was not reached by every text choice"
    )
    frame = everyone
    result = summary(frame)
    table = by_k(frame, REPORTED_KS)
    print(f"per text choice and k ({frame['corpus'].nunique()} corpora, {frame['draw'].nunique()} draws):")
    print(table.round(3).to_string(index=False))
    print("mean over k = 16 ... 128 (every batch):")
    print(frame.groupby("method")["lost"].mean().round(3).to_string())
    print("model changes between consecutive batches after 32 labels", json.dumps(result["stability"]))
    print("calibration error", {m: round(c["overall"], 3) for m, c in result["calibration"].items()})
    corpora = frame.groupby(["corpus", "method"])["lost"].mean().unstack().round(2)
    print("mean points lost per corpus (every k):")
    print(corpora.to_string())
    nested = nested_choice(frame)
    print("chosen leave one corpus out (fewest mean points lost over k on the other corpora):")
    print(nested.round(2).to_string(index=False))
    print(f"mean: chosen {nested['lost'].mean():.3f}, random {nested['random'].mean():.3f}")
    if json_path:
        json_path.write_text(json.dumps({
            "by_k": table.to_dict(orient="records"), "stability": result["stability"],
            "calibration": {m: c["overall"] for m, c in result["calibration"].items()},
            "per_corpus": corpora.reset_index().to_dict(orient="records"),
            "nested": nested.to_dict(orient="records"),
        }, indent=1, default=float))  # fmt: skip


if __name__ == "__main__":
    main()
