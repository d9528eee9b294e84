"""Benchmark: full flow and GMM sufficiency matrices for a pool of embedders.

Usage::

    python bench/speed/sufficiency_matrix.py                       # synthetic pool, dims 384,768,50,64,256,384
    python bench/speed/sufficiency_matrix.py --embeddings-dir DIR  # every DIR/*.npy is one model (n, d)

Prints wall time, peak memory (process max RSS and tracemalloc's Python-heap peak), the split between
marginal and conditional training, the ranking, and the ratio against a naive schedule that retrains
the target marginal for every pair instead of sharing it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses.sufficiency import FlowConfig, GMMConfig, model_scores, sufficiency_matrix  # noqa: E402


def synthetic_pool(
    n: int, dims: list[int], seed: int, latent: int = 32
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Models x_k = tanh(z W_k) + sigma_k * noise, z ~ N(0, I_latent) (n, latent); sigma grows with k.

    Returns the pool and the expected order (least noisy first): a model that keeps more of z
    predicts the others better.
    """
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, latent))
    sigmas = np.linspace(0.2, 1.6, len(dims))
    pool = {}
    for k, (d, sigma) in enumerate(zip(dims, sigmas, strict=True)):
        w = rng.standard_normal((latent, d)) / np.sqrt(latent)
        pool[f"synthetic-{k}-d{d}-noise{sigma:.2f}"] = (
            np.tanh(z @ w) + sigma * rng.standard_normal((n, d))
        ).astype(np.float32)
    return pool, list(pool)


def load_dir(directory: Path, n: int | None) -> dict[str, np.ndarray]:
    pool = {}
    for path in sorted(directory.glob("*.npy")):
        arr = np.load(path, allow_pickle=False)
        pool[path.stem] = arr[:n] if n else arr
    if len(pool) < 2:
        raise SystemExit(f"{directory} holds {len(pool)} .npy files; need at least 2")
    return pool


def run(
    estimator: str, pool: dict[str, np.ndarray], config, seed: int, device: str | None, verbose: bool
) -> dict:
    tracemalloc.start()
    start = time.perf_counter()

    def report(event: dict) -> None:
        print(
            f"  [{time.perf_counter() - start:7.1f} s] {event['done']}/{event['total']} {event['stage']} "
            f"{event['source'] or ''} -> {event['target']}",
            flush=True,
        )

    result = sufficiency_matrix(
        pool,
        estimator=estimator,
        config=config,
        seed=seed,
        device=device,
        progress=report if verbose else None,
    )
    wall = time.perf_counter() - start
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    marg_s = float(result.marginals["seconds"].sum())
    cond_s = float(result.records["seconds"].sum())
    n_pairs = len(result.records)
    mean_marg = marg_s / max(1, len(result.marginals))
    naive = marg_s + cond_s + mean_marg * (n_pairs - len(result.marginals))
    scores = model_scores(result, n_boot=200, seed=seed)
    return {
        "estimator": estimator,
        "wall_s": wall,
        "marginal_s": marg_s,
        "conditional_s": cond_s,
        "n_marginals": len(result.marginals),
        "n_pairs": n_pairs,
        "naive_s": naive,
        "py_heap_peak_mb": py_peak / 2**20,
        "scores": scores,
        "result": result,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embeddings-dir", type=Path, default=None)
    parser.add_argument("--n", type=int, default=2000, help="rows (texts); synthetic size or truncation")
    parser.add_argument("--dims", default="384,768,50,64,256,384", help="synthetic model widths")
    parser.add_argument("--estimators", default="flow,gmm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--fast", action="store_true", help="use the FlowConfig.fast / GMMConfig.fast presets"
    )
    parser.add_argument("--verbose", action="store_true", help="print each finished unit")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.embeddings_dir is not None:
        pool, expected = load_dir(args.embeddings_dir, args.n), None
    else:
        pool, expected = synthetic_pool(args.n, [int(d) for d in args.dims.split(",")], args.seed)
    print(
        f"pool: {len(pool)} models, n={next(iter(pool.values())).shape[0]}, dims={[a.shape[1] for a in pool.values()]}"
    )
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {args.device or 'auto'}")

    for estimator in args.estimators.split(","):
        if estimator == "flow":
            config = FlowConfig.fast() if args.fast else FlowConfig()
        else:
            config = GMMConfig.fast() if args.fast else GMMConfig()
        out = run(estimator, pool, config, args.seed, args.device, args.verbose)
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\n== {estimator} ==")
        print(
            f"wall {out['wall_s']:.1f} s  (marginals {out['marginal_s']:.1f} s for {out['n_marginals']}, "
            f"conditionals {out['conditional_s']:.1f} s for {out['n_pairs']} pairs)"
        )
        print(
            f"naive schedule (one marginal per pair): ~{out['naive_s']:.1f} s -> "
            f"shared marginals x{out['naive_s'] / max(out['wall_s'], 1e-9):.2f} faster"
        )
        print(f"peak RSS so far {rss_mb:.0f} MiB, python-heap peak {out['py_heap_peak_mb']:.1f} MiB")
        rec = out["result"].records
        print(
            f"epochs: marginal {out['result'].marginals['epochs'].tolist()}, conditional median "
            f"{int(rec['epochs'].median())} (max {int(rec['epochs'].max())})"
        )
        print(out["scores"].to_string(index=False))
        if expected is not None:
            got = out["scores"].set_index("model")["rank"].reindex(expected).to_numpy()
            from scipy.stats import spearmanr

            rho = spearmanr(np.arange(1, len(expected) + 1), got).statistic
            print(f"Spearman(expected order, obtained rank) = {rho:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
