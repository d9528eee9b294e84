"""Benchmark: information sufficiency beyond the random-weights control, I(U; V | R), with the flows,
judged on stored validity-benchmark runs like the product's own scores.

Usage::

    python bench/studies/is_given_random.py --runs-dir RUNS [--runs-dir RUNS2 ...] [--json out.json]

Every ``RUNS`` is a run store holding ``benchmark/benchmark.json`` (``flare benchmark``). For each corpus
it reads the run's stored embeddings and, with the run's own split (seed 0, a tenth held out), whitening
(32 dimensions, fitted on the training rows) and FLARE flow (:class:`FlowConfig`), fits one more matrix:

    IS(R -> V)        the random-weights network R (``random-minilm-l6``) as the source
    IS([U, R] -> V)   each model U side by side with R (64 whitened dimensions) as the source

for every target V the product uses (every model that is not a control). Then

    I(U; V | R) = H(V | R) - H(V | U, R) = IS([U, R] -> V) - IS(R -> V)

is what U tells about V beyond what an untrained network of the same architecture already tells, and
the score is its median over targets per target dimension (as FLARE's Eq. 4). It prints, per corpus, the
Spearman ρ (and interval) with the benchmark's oracle over the ranked candidates, next to the product's
``flow`` score of the same run, the points lost by each score's top model, and the seconds of the matrix.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix  # noqa: E402
from flare_core.analyses.sufficiency._standardize import split_indices  # noqa: E402
from flare_core.analyses.sufficiency._whiten import fit_whitening, whiten  # noqa: E402
from flare_core.answer.evidence import control_kind  # noqa: E402
from flare_core.answer.trust import RANDOM_WEIGHTS  # noqa: E402
from flare_core.choosing.validity import agreement, regret_points  # noqa: E402
from flare_core.store.manifest import roles  # noqa: E402
from flare_core.store.runs import RunStore  # noqa: E402

VAL_FRACTION = 0.1
WIDTH = 32
SEED = 0


def given_random_scores(
    embeddings: dict[str, np.ndarray], random: str, targets: list[str], sources: list[str]
) -> tuple[pd.Series, float]:
    """The median over targets of (IS([U, R] -> V) - IS(R -> V)) / d_V per source U, and the seconds."""
    n = len(next(iter(embeddings.values())))
    train, _ = split_indices(n, VAL_FRACTION, SEED)
    white = {m: whiten(x, *fit_whitening(x, train, WIDTH)) for m, x in embeddings.items()}
    pool = {t: white[t] for t in targets}
    pool["R"] = white[random]
    for s in sources:
        pool[f"{s} + R"] = np.concatenate([white[s], white[random]], axis=1)
    start = time.perf_counter()
    result = sufficiency_matrix(
        pool,
        estimator="flow",
        config=FlowConfig(),
        sources=["R", *[f"{s} + R" for s in sources]],
        targets=targets,
        seed=SEED,
        val_fraction=VAL_FRACTION,
        device="cpu",
    )
    seconds = time.perf_counter() - start
    is_matrix, dims = result.is_matrix, result.dims
    scores = {}
    for s in sources:
        beyond = [(is_matrix.loc[f"{s} + R", t] - is_matrix.loc["R", t]) / dims[t] for t in targets if t != s]
        scores[s] = float(np.median(beyond))
    return pd.Series(scores, name="flow_given_random"), seconds


def judge_corpus(store: RunStore, record: dict[str, Any]) -> dict[str, Any]:
    run = store.get(record["run_id"])
    role_of = roles(run)
    done = [m["id"] for m in run.manifest["models"] if m.get("status") == "done"]
    controls = [m for m in done if role_of.get(m) == "control"]
    random = next(m for m in controls if control_kind(m) == RANDOM_WEIGHTS)
    targets = [m for m in done if m not in controls]
    embeddings = {m: np.asarray(run.load_embeddings(m), dtype=np.float32) for m in done}
    scores, seconds = given_random_scores(embeddings, random, targets, targets)
    table = pd.DataFrame(record["table"]).set_index("model")
    candidates = record["candidates"]
    judged = pd.DataFrame({"flow": table["flow"], "flow_given_random": scores})
    agree = agreement(judged, table["oracle"].astype(float), candidates, seed=SEED).set_index("score")
    lost = {
        c: regret_points(table["oracle"].astype(float), judged.loc[candidates, c].idxmax(), candidates)
        for c in judged.columns
    }
    return {
        "corpus": record["corpus"],
        "seconds": seconds,
        "scores": scores.to_dict(),
        "agreement": agree.reset_index().to_dict(orient="records"),
        "points_lost": lost,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, action="append", required=True)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    print("| corpus | ρ flow [interval] | ρ flow given R [interval] | lost flow | lost given R | s |")
    print("|---|---|---|---|---|---|")
    for root in args.runs_dir:
        store = RunStore(root)
        bench = json.loads((root / "benchmark" / "benchmark.json").read_text(encoding="utf-8"))
        for record in bench["corpora"]:
            row = judge_corpus(store, record)
            rows.append(row)
            agree = {a["score"]: a for a in row["agreement"]}
            cells = [f"{agree[c]['spearman']:.2f} [{agree[c]['ci_low']:.2f}, {agree[c]['ci_high']:.2f}]" for c in
                     ("flow", "flow_given_random")]  # fmt: skip
            lost = row["points_lost"]
            print(
                f"| {row['corpus']} | {cells[0]} | {cells[1]} | {lost['flow']:.1f} | "
                f"{lost['flow_given_random']:.1f} | {row['seconds']:.0f} |",
                flush=True,
            )
    for score in ("flow", "flow_given_random"):
        values = [next(a["spearman"] for a in r["agreement"] if a["score"] == score) for r in rows]
        print(f"mean ρ {score}: {np.mean(values):.2f} over {len(values)} corpora")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
