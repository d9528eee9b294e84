"""Benchmark: the conditional flows of each target one by one vs batched into one vmapped model.

Usage::

    python bench/speed/batched_conditionals.py              # 6 synthetic models, 2,000 texts, fast flows
    python bench/speed/batched_conditionals.py --preset default --device cuda

Trains the same flow sufficiency matrix twice, with ``FlowConfig.batch_conditionals`` 1 (each pair its
own task) and K (all sources of a target in one batched task), and prints both wall times, the ratio
(one by one / batched: above 1 when batching is faster) and the largest difference between the two IS
matrices. The marginals are the same in both and are trained once more each time.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.speed.sufficiency_matrix import synthetic_pool  # noqa: E402
from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--dims", default="384,768,50,64,256,384")
    parser.add_argument("--preset", choices=["fast", "default"], default="fast")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dims = [int(d) for d in args.dims.split(",")]
    pool, _ = synthetic_pool(args.n, dims, seed=0)
    base = FlowConfig.fast() if args.preset == "fast" else FlowConfig()
    k = len(pool) - 1
    results, seconds = {}, {}
    for group in (1, k):
        config = dataclasses.replace(base, batch_conditionals=group)
        start = time.perf_counter()
        results[group] = sufficiency_matrix(pool, config=config, device=args.device, seed=0)
        seconds[group] = time.perf_counter() - start
        print(f"batch_conditionals={group}: {seconds[group]:7.1f} s", flush=True)
    a = results[1].is_matrix.to_numpy()
    b = results[k].is_matrix.to_numpy()
    diff = np.nanmax(np.abs(a - b))
    print(
        f"{len(pool)} models, n={args.n}, {args.preset} flows on {args.device} "
        f"({torch.get_num_threads()} torch threads): one by one / batched = {seconds[1] / seconds[k]:.2f}; "
        f"largest |IS difference| {diff:.2e} nats (IS range {np.nanmin(a):.2f} to {np.nanmax(a):.2f})"
    )


if __name__ == "__main__":
    main()
