"""Benchmark: the flows stage of a run, as a run does it (its executor, its flow configuration).

Usage::

    python bench/speed/flows_stage.py                         # 16 synthetic models × 2,000 texts, the run's pool
    python bench/speed/flows_stage.py --batch-conditionals 1  # the conditionals one task per pair
    python bench/speed/flows_stage.py --embeddings-dir DIR    # every DIR/*.npy is one model (n, d)
    python bench/speed/flows_stage.py --json out.json         # the IS matrix and the timings, for a comparison
    python bench/speed/flows_stage.py --set patience=2        # a FlowConfig field changed

The stage's flow configuration comes from the run's own rule (``FlowEstimator.run_config`` with
:func:`~flare_core.run.sufficiency_stage.conditionals_per_model`; ``--batch-conditionals`` overrides it),
its executor from :func:`~flare_core.run.stages.make_executor` (a pool of one worker per core on a large
matrix), the whitened width is the run's (32). Prints the wall time, the workers' busy seconds split into
marginals and conditionals, what the pool cost besides (workers started, imports, waiting), and the
ranking. ``--compare A.json B.json`` prints the ratio of the two wall times and how far the matrices and
rankings differ.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.speed.sufficiency_matrix import load_dir, synthetic_pool  # noqa: E402

#: The widths of the 16 candidates of the default pool.
POOL_WIDTHS = "384,768,384,384,50,64,256,100,512,100,256,64,256,64,256,64"


def run_stage(
    pool: dict[str, np.ndarray],
    batch_conditionals: int | None,
    workers: int | None,
    overrides: dict[str, Any] | None = None,
) -> dict:
    from flare_core.analyses.sufficiency import get_estimator, model_scores, sufficiency_matrix
    from flare_core.compute.executor import torch_threads
    from flare_core.run.params import RunParams
    from flare_core.run.stages import make_executor
    from flare_core.run.sufficiency_stage import conditionals_per_model

    names = list(pool)
    params = RunParams(models=names, controls=[], workers=workers)
    if batch_conditionals is not None:
        params.batch_conditionals = batch_conditionals
    group = conditionals_per_model(params, len(names) - 1)
    config = get_estimator("flow").run_config(params.flow_preset, batch_conditionals=group)
    config = dataclasses.replace(config, **(overrides or {}))
    units = len(names) * len(names)
    start = time.perf_counter()
    executor = make_executor(params, is_units=units, n_texts=len(next(iter(pool.values()))))
    busy = {"marginal": 0.0, "conditional": 0.0}
    workers_seen: set[str] = set()

    def progress(event: dict) -> None:
        if event.get("seconds") is not None:
            busy[event["stage"]] += float(event["seconds"])
            workers_seen.add(str(event.get("worker")))

    try:
        with torch_threads(1) if executor is None else _nothing():
            result = sufficiency_matrix(
                pool, config=config, seed=params.seed, max_dims=params.max_dims, executor=executor,
                progress=progress,
            )  # fmt: skip
    finally:
        if executor is not None:
            executor.close()
    wall = time.perf_counter() - start
    scores = model_scores(result, seed=params.seed)
    n_workers = max(1, len(workers_seen))
    return {
        "batch_conditionals": group,
        "workers": n_workers,
        "wall_s": wall,
        "busy_marginal_s": busy["marginal"],
        "busy_conditional_s": busy["conditional"],
        "outside_units_s": wall - (busy["marginal"] + busy["conditional"]) / n_workers,
        "epochs_conditional": float(result.records["epochs"].mean()),
        "epochs_marginal": float(result.marginals["epochs"].mean()),
        "is_matrix": result.is_matrix.to_numpy().tolist(),
        "names": names,
        "scores": dict(zip(scores["model"], scores["score"].astype(float), strict=True)),
    }


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def compare(a: dict, b: dict) -> None:
    from scipy.stats import spearmanr

    ma, mb = np.array(a["is_matrix"], dtype=float), np.array(b["is_matrix"], dtype=float)
    both = np.isfinite(ma) & np.isfinite(mb)
    names = a["names"]
    rho = spearmanr([a["scores"][m] for m in names], [b["scores"][m] for m in names]).statistic
    cells = spearmanr(ma[both], mb[both]).statistic
    print(f"wall: {a['wall_s']:.1f} s -> {b['wall_s']:.1f} s, ratio {a['wall_s'] / b['wall_s']:.2f}×")
    print(
        f"IS matrix: max |difference| {np.max(np.abs(ma[both] - mb[both])):.3f} nats "
        f"(range {np.min(ma[both]):.2f} to {np.max(ma[both]):.2f}); Spearman ρ of the cells {cells:.4f}, "
        f"of the models' scores {rho:.4f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--dims", default=POOL_WIDTHS)
    parser.add_argument("--embeddings-dir", type=Path, default=None)
    parser.add_argument("--batch-conditionals", type=int, default=None, help="default: the run's rule")
    parser.add_argument("--workers", type=int, default=None, help="default: the run's pool size")
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="a FlowConfig field"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--compare", type=Path, nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        compare(*(json.loads(p.read_text()) for p in args.compare))
        return 0
    if args.embeddings_dir:
        pool = load_dir(args.embeddings_dir, args.n)
    else:
        pool, _ = synthetic_pool(args.n, [int(d) for d in args.dims.split(",")], seed=0)
    overrides = {k: json.loads(v) for k, _, v in (item.partition("=") for item in args.set)}
    out = run_stage(pool, args.batch_conditionals, args.workers, overrides)
    print(
        f"{len(pool)} models × {args.n}: {out['wall_s']:.1f} s on {out['workers']} worker(s), "
        f"batch_conditionals {out['batch_conditionals']}; busy: marginals {out['busy_marginal_s']:.1f} s, "
        f"conditionals {out['busy_conditional_s']:.1f} s; outside the units {out['outside_units_s']:.1f} s; "
        f"mean epochs: marginal {out['epochs_marginal']:.1f}, conditional {out['epochs_conditional']:.1f}",
        flush=True,
    )
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
