"""Benchmark: the conditional flows of each target as one batched model vs those of all targets as one.

Usage::

    python bench/speed/all_target_flows.py                      # 6 synthetic models × 2,000 texts, default preset
    python bench/speed/all_target_flows.py --embeddings-dir DIR # every DIR/*.npy is one model (n, d)
    python bench/speed/all_target_flows.py --ladder             # and the known-truth ladder, rung by rung
    python bench/speed/all_target_flows.py --device cuda --threads 4

The matrix: the run's flow configuration (``FlowEstimator.run_config``, every source of a target in one
batched model, whitened to the run's width, 32) trained per target (``batch_targets`` 1, as a run does)
and with the conditionals of every target of one width in one batched model (``batch_targets`` = the
number of models), ``--repeats`` times each in the order per-target, all-target, all-target, per-target…
so that a load that drifts weighs on both. Prints each wall time and the conditional units' busy seconds,
their ratios (per-target / all-target: above 1 when all-target batching is faster), the largest
difference of the two IS matrices (nats) and the Spearman ρ of the models' scores.

``--ladder``: each rung of ``bench/studies/is_ladder.py`` (its pairs, split, whitening and seeds, so the
per-target figure is that study's) with its conditional trained alone and, batched with the other rungs
of its whitened width, as one all-target model; prints both estimates, the analytic value and the times.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.speed.sufficiency_matrix import load_dir, synthetic_pool  # noqa: E402
from flare_core.analyses.sufficiency import get_estimator, model_scores, sufficiency_matrix  # noqa: E402
from flare_core.analyses.sufficiency._batched import (  # noqa: E402
    TargetGroup,
    fit_conditionals_across_targets,
    fit_conditionals_batched,
)
from flare_core.analyses.sufficiency._standardize import _derive_seed, split_indices  # noqa: E402
from flare_core.analyses.sufficiency._whiten import fit_whitening, whiten  # noqa: E402
from flare_core.run.params import DEFAULT_MAX_DIMS  # noqa: E402


def time_matrix(
    pool: dict[str, np.ndarray], config: Any, device: str, max_dims: int | None
) -> dict[str, Any]:
    """One sufficiency matrix of ``pool``: its result, wall seconds and the busy seconds of each stage."""
    busy = {"marginal": 0.0, "conditional": 0.0}

    def progress(event: dict) -> None:
        if event.get("seconds") is not None:
            busy[event["stage"]] += float(event["seconds"])

    start = time.perf_counter()
    result = sufficiency_matrix(
        pool, config=config, seed=0, device=device, max_dims=max_dims, progress=progress
    )
    return {"result": result, "wall": time.perf_counter() - start, **busy}


def compare_matrices(pool: dict[str, np.ndarray], args: argparse.Namespace) -> None:
    from scipy.stats import spearmanr

    names = list(pool)
    base = get_estimator("flow").run_config(args.preset, batch_conditionals=len(names) - 1)
    arrangements = {
        "per-target": base,
        "all-target": dataclasses.replace(base, batch_targets=len(names)),
    }
    order = ["per-target", "all-target"]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for r in range(args.repeats):
        for name in order if r % 2 == 0 else order[::-1]:
            out = time_matrix(pool, arrangements[name], args.device, args.max_dims)
            runs[name].append(out)
            print(
                f"{name}: {out['wall']:7.1f} s wall, conditionals {out['conditional']:7.1f} s, "
                f"marginals {out['marginal']:6.1f} s",
                flush=True,
            )
    a, b = runs["per-target"][0]["result"], runs["all-target"][0]["result"]
    ma, mb = a.is_matrix.to_numpy(), b.is_matrix.to_numpy()
    both = np.isfinite(ma) & np.isfinite(mb)
    sa, sb = (model_scores(x, seed=0).set_index("model")["score"] for x in (a, b))
    rho = spearmanr(sa.loc[names], sb.loc[names]).statistic
    wall = [np.mean([o["wall"] for o in runs[name]]) for name in order]
    cond = [np.mean([o["conditional"] for o in runs[name]]) for name in order]
    epochs = a.records["epochs"].to_numpy(), b.records["epochs"].to_numpy()
    print(
        f"{len(names)} models × {len(next(iter(pool.values())))} texts, {args.preset} flows, width "
        f"{args.max_dims}, {args.device}, {torch.get_num_threads()} torch thread(s), {args.repeats} run(s) each: "
        f"per-target / all-target = {wall[0] / wall[1]:.3f} (wall {wall[0]:.1f} s vs {wall[1]:.1f} s), "
        f"conditionals {cond[0] / cond[1]:.3f} ({cond[0]:.1f} s vs {cond[1]:.1f} s); "
        f"max |IS difference| {np.max(np.abs(ma[both] - mb[both])):.2e} nats "
        f"(IS {np.min(ma[both]):.2f} to {np.max(ma[both]):.2f}); Spearman ρ of the scores {rho:.4f}; "
        f"same epochs {bool(np.array_equal(*epochs))}",
        flush=True,
    )


def ladder(args: argparse.Namespace) -> None:
    """The known-truth ladder's conditionals per rung alone and batched across the rungs of one width."""
    from bench.studies.is_ladder import make_pair

    estimator = get_estimator("flow")
    config = estimator.run_config(args.preset)
    device = torch.device(args.device)
    seed = 0
    rungs: list[dict[str, Any]] = []
    for d in (int(x) for x in args.ladder_dims.split(",")):
        for kind in ("gauss", "cubic", "shuffled"):
            pair = make_pair(kind, d, args.ladder_n, seed)
            train_idx, val_idx = split_indices(args.ladder_n, 0.1, seed)
            u, v = (whiten(x, *fit_whitening(x, train_idx, args.max_dims)) for x in (pair.u, pair.v))
            marginal = estimator._fit_marginal(
                v[train_idx], v[val_idx], config, _derive_seed(seed, "marginal", "V"), device
            )
            group = TargetGroup(
                marginal.model.eval(),
                [(u[train_idx], u[val_idx], _derive_seed(seed, "conditional", "U", "V"))],
                v[train_idx],
                v[val_idx],
            )
            rungs.append(
                {"rung": f"{kind} d={d}", "truth": pair.information, "marg": marginal, "group": group}
            )
    start = time.perf_counter()
    alone = [fit_conditionals_batched(r["group"].marginal, *_parts(r["group"]), config)[0] for r in rungs]
    seconds_alone = time.perf_counter() - start
    widths: dict[int, list[int]] = {}
    for i, r in enumerate(rungs):
        widths.setdefault(int(r["group"].v_train.shape[1]), []).append(i)
    start = time.perf_counter()
    together: dict[int, Any] = {}
    for members in widths.values():
        fits = fit_conditionals_across_targets([rungs[i]["group"] for i in members], config)
        together.update({i: fit[0] for i, fit in zip(members, fits, strict=True)})
    seconds_together = time.perf_counter() - start
    print("| rung | analytic | alone | all-target | difference (nats) | bias % alone | bias % all-target |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for i, r in enumerate(rungs):
        nll_marg = r["marg"].nll_val
        a, b = nll_marg - alone[i].nll_val, nll_marg - together[i].nll_val
        worst = max(worst, abs(a - b))
        truth = r["truth"]
        bias = [f"{100 * (x - truth) / truth:+.1f}" if truth else "—" for x in (a, b)]
        print(f"| {r['rung']} | {truth:.2f} | {a:.3f} | {b:.3f} | {a - b:+.2e} | {bias[0]} | {bias[1]} |")
    print(
        f"ladder, n={args.ladder_n}: conditionals alone {seconds_alone:.1f} s, all-target {seconds_together:.1f} s "
        f"(ratio {seconds_alone / seconds_together:.3f}); largest |difference| {worst:.2e} nats",
        flush=True,
    )


def _parts(group: TargetGroup) -> tuple[Any, Any, Any]:
    return group.sources, group.v_train, group.v_val


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--dims", default="384,768,50,64,256,384")
    parser.add_argument("--embeddings-dir", type=Path, default=None)
    parser.add_argument("--preset", choices=["fast", "default"], default="default")
    parser.add_argument("--max-dims", type=int, default=DEFAULT_MAX_DIMS, help="the whitened width")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (a run uses one)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each arrangement")
    parser.add_argument("--ladder", action="store_true", help="also the known-truth ladder")
    parser.add_argument("--ladder-only", action="store_true", help="only the known-truth ladder")
    parser.add_argument("--ladder-dims", default="8,64,384,768")
    parser.add_argument("--ladder-n", type=int, default=2000)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not args.ladder_only:
        if args.embeddings_dir:
            pool = load_dir(args.embeddings_dir, args.n)
        else:
            pool, _ = synthetic_pool(args.n, [int(d) for d in args.dims.split(",")], seed=0)
        compare_matrices(pool, args)
    if args.ladder or args.ladder_only:
        ladder(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
