"""Does the candidates' consensus on the unlabelled texts (CODA-style, ICCV 2025) improve the few-label
pick when added to the shipped accuracy posterior? Judged leave one corpus out on the answer benchmark's
kept embeddings (``bench/studies/draws/consensus_draws.py``).

For each classification corpus kept under ``--root`` (``flare benchmark --stage answer``), seeded draws
of random texts are labelled in batches of 16 (the draws of ``bench/studies/few_label_prior.py``); after
each batch the shipped posterior names a model, and so do its two consensus variants: the posterior
updated by each candidate's agreement with the candidates' majority vote on the unlabelled texts (plain,
or each vote weighted by the shipped posterior's chance of being best), that agreement linked to the
oracle standing by a slope and a residual spread learned at the same k on the *other* corpora.

Prints, per k: mean points lost and share within 2 points (each method, and the label-free pick), how
often the named model changes between consecutive batches after 32 labels, the calibration of the
stated chance of being within 2 points (overall and the worst corpora), the settled draws, the links
(β and σ by k), how closely the consensus tracks the oracle, and the mean points lost per corpus with
the count of corpora each variant wins. ``--json`` writes every figure.

    .venv/bin/python bench/studies/consensus_posterior.py --root .cache/answer-benchmark --draws 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.studies.draws.consensus_draws import VARIANTS, fit_quality, judge_all, link_summary  # noqa: E402
from flare_core.benchmark.answer_stage import judged_record  # noqa: E402
from flare_core.benchmark.embedding_store import kept_corpora  # noqa: E402
from flare_core.benchmark.posterior_draws import SHIPPED, TOLERANCE, per_corpus, summary  # noqa: E402

#: The k the tables show.
SHOWN_KS = (16, 32, 48, 64, 128)


def _print_tables(frame: pd.DataFrame, result: dict) -> pd.DataFrame:
    """Print the summary's tables; returns the per-corpus table."""
    by_k = pd.DataFrame(result["by_k"])
    by_k = by_k[by_k["k"].isin(SHOWN_KS)]
    print(f"mean points lost by k (label-free pick: {result['label_free']['mean_lost']:.2f})")
    print(by_k.pivot(index="k", columns="method", values="mean_lost").round(2).to_string())
    print(f"share within {TOLERANCE:g} points by k (label-free: {result['label_free']['within']:.2f})")
    print(by_k.pivot(index="k", columns="method", values="within").round(2).to_string())
    print("model changes between consecutive batches after 32 labels", json.dumps(result["stability"]))
    print("settled", json.dumps(result["settled"], default=float))
    for method, calibration in result["calibration"].items():
        worst = sorted(calibration["per_corpus"].items(), key=lambda kv: -kv[1])[:4]
        print(
            f"calibration {method}: {calibration['overall']:.3f}; worst", [(c, round(e, 3)) for c, e in worst]
        )
    corpora = per_corpus(frame)
    for method in VARIANTS:
        better = int((corpora[method] < corpora[SHIPPED] - 1e-9).sum())
        worse = int((corpora[method] > corpora[SHIPPED] + 1e-9).sum())
        print(f"{method} against {SHIPPED}: better on {better} corpora, worse on {worse}, of {len(corpora)}")
    print(corpora.round(2).to_string())
    return corpora


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
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = Path(args.root)
    every = kept_corpora(root, "classification")
    names = [n for n in args.corpora.split(",") if n] or every
    start = time.perf_counter()
    # every kept classification corpus is a record the priors learn from; only ``names`` are judged
    records = {n: judged_record(root, n, seed=args.seed) for n in sorted(set(every) | set(names))}
    print(f"judged {len(records)} corpora in {time.perf_counter() - start:.0f} s", flush=True)
    frame, links, cases = judge_all(
        str(root), records, names, args.draws, args.seed,
        log=lambda n: print(f"{n}: {time.perf_counter() - start:.0f} s", flush=True),
    )  # fmt: skip
    result = summary(frame)
    corpora = _print_tables(frame, result)
    link = link_summary(links)
    print("links (β: oracle standing per unit of agreement standing; σ: residual spread, points), by k:")
    print(link.round(3).to_string())
    quality = fit_quality(cases)
    print("consensus against the oracle standing (correlation; share of leaders within 2 points), by k:")
    print(quality.round(2).to_string())
    if args.json:
        args.json.write_text(json.dumps({
            "summary": result, "per_corpus": corpora.reset_index().to_dict(orient="records"),
            "links": link.reset_index().to_dict(orient="records"),
            "fit_quality": quality.reset_index().to_dict(orient="records"),
        }, indent=1, default=float))  # fmt: skip


if __name__ == "__main__":
    main()
