"""Benchmark: the same sufficiency matrix serially in this process, on a local process pool and on Ray.

Usage::

    python bench/speed/executors.py                    # 6 synthetic models, GMM fast, 2 workers, 2 Ray CPUs
    python bench/speed/executors.py --n 2000 --workers 4 --num-cpus 4 --estimator flow
    python bench/speed/executors.py --address auto     # an existing cluster instead of a local instance

Prints the wall time of each executor: serial local (the reference), the local process pool
(``LocalExecutor(workers=N)``, one torch thread per worker; the first matrix includes starting the
workers, the second reuses them) and Ray (the figure includes starting the instance and its workers,
and is also given without it); whether each IS matrix is identical to the serial one, and the ratios
to serial: below 1 when the parallelism beats the per-task overhead (pickling arrays and marginal
weights, importing torch in each worker).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses.sufficiency import FlowConfig, GMMConfig, SufficiencyResult, sufficiency_matrix  # noqa: E402
from flare_core.compute import LocalExecutor, RayExecutor  # noqa: E402


def synthetic_pool(n: int, dims: list[int], seed: int, latent: int = 16) -> dict[str, np.ndarray]:
    """Models x_k = tanh(z W_k) + sigma_k * noise (n, d_k), z ~ N(0, I_latent); sigma grows with k."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, latent))
    pool = {}
    for k, (d, sigma) in enumerate(zip(dims, np.linspace(0.2, 1.6, len(dims)), strict=True)):
        w = rng.standard_normal((latent, d)) / np.sqrt(latent)
        pool[f"m{k}-d{d}"] = (np.tanh(z @ w) + sigma * rng.standard_normal((n, d))).astype(np.float32)
    return pool


def _cold_and_warm(
    executor, pool: dict[str, np.ndarray], kwargs: dict
) -> tuple[SufficiencyResult, float, float]:
    """The matrix on ``executor`` twice: (first result, first wall time, second wall time), then close it.

    The first run includes starting the workers (and importing torch in each); the second reuses them.
    """
    try:
        start = time.perf_counter()
        first = sufficiency_matrix(pool, executor=executor, **kwargs)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        sufficiency_matrix(pool, executor=executor, **kwargs)
        warm = time.perf_counter() - start
    finally:
        executor.close()
    return first, cold, warm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="rows (texts)")
    parser.add_argument("--dims", default="32,48,16,24,64,32", help="comma-separated model widths")
    parser.add_argument("--estimator", choices=["gmm", "flow"], default="gmm")
    parser.add_argument("--workers", type=int, default=2, help="processes of the local pool")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance")
    parser.add_argument("--no-ray", action="store_true", help="skip Ray (serial and process pool only)")
    parser.add_argument("--address", default=None, help="join this Ray cluster instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    dims = [int(d) for d in args.dims.split(",")]
    pool = synthetic_pool(args.n, dims, args.seed)
    config = GMMConfig.fast() if args.estimator == "gmm" else FlowConfig.fast()
    kwargs = {"estimator": args.estimator, "config": config, "seed": args.seed, "device": "cpu"}
    units = len(dims) + len(dims) * (len(dims) - 1)
    print(f"pool: {len(dims)} models, dims {dims}, n={args.n}, {args.estimator}, {units} units")

    torch.set_num_threads(1)  # as inside each Ray task, so that the numbers are comparable bit for bit
    start = time.perf_counter()
    local = sufficiency_matrix(pool, executor=LocalExecutor(), **kwargs)
    t_local = time.perf_counter() - start
    print(f"local (1 process, 1 thread):   {t_local:7.2f} s")

    pooled, t_pool, t_pool_warm = _cold_and_warm(
        LocalExecutor(workers=args.workers, threads_per_worker=1), pool, kwargs
    )
    pool_same = _same(local, pooled)
    print(f"local pool ({args.workers} processes, 1 thread each): first matrix {t_pool:7.2f} s "
          f"(starts the workers), warm matrix {t_pool_warm:7.2f} s; identical IS matrix: {pool_same}")  # fmt: skip
    print(f"ratio pool / serial: {t_pool / t_local:.2f} (cold workers), {t_pool_warm / t_local:.2f} (warm)")
    if args.no_ray:
        return 0 if pool_same else 1

    start = time.perf_counter()
    if args.address:
        ray_ex = RayExecutor(address=args.address)
    else:
        ray_ex = RayExecutor(num_cpus=args.num_cpus, init_kwargs={"logging_level": "ERROR"})
    t_init = time.perf_counter() - start
    remote, t_ray, t_warm = _cold_and_warm(ray_ex, pool, kwargs)
    where = args.address or f"local instance, {args.num_cpus} CPUs"
    print(f"ray ({where}): init {t_init:6.2f} s + first matrix {t_ray:7.2f} s, warm matrix {t_warm:7.2f} s")
    same = _same(local, remote)
    print(f"identical IS matrix (ray): {same}")
    print(f"ratio ray / serial: {(t_init + t_ray) / t_local:.2f} (with init), {t_ray / t_local:.2f} (cold "
          f"workers), {t_warm / t_local:.2f} (warm workers)")  # fmt: skip
    return 0 if same and pool_same else 1


def _same(reference: SufficiencyResult, other: SufficiencyResult) -> bool:
    """Whether ``other`` has no failure and the same IS matrix as ``reference``, bit for bit."""
    matrix_a, matrix_b = reference.is_matrix.to_numpy(), other.is_matrix.to_numpy()
    return bool(np.array_equal(matrix_a, matrix_b, equal_nan=True) and other.failed.empty)


if __name__ == "__main__":
    raise SystemExit(main())
