"""Embedding throughput of the built-in models: cold (model runs) vs cached (read from the embedding cache).

Run: ``python bench/speed/embed_throughput.py [--n 1000] [--n-transformer-large 200] [--controls]``

Texts come from the BBC News demo corpus (``flare_core.data.demo.bbc_news_frame``) when it is installed,
otherwise from a seeded synthetic generator. For each model: load time, texts/second cold (through
``embed`` with an empty cache, so it includes writing the cache entry), texts/second on the second,
cached call, and the cached/cold speed ratio (the naive reference is recomputing every time).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.encoders import BUILTIN_IDS, CONTROL_IDS, embed, is_available, load_encoder, texts_hash  # noqa: E402

LARGE = {"all-mpnet-base-v2"}


def bench_texts(n: int, seed: int = 0) -> tuple[list[str], str]:
    """``n`` texts and a description of where they came from."""
    try:
        from flare_core.data.demo import bbc_news_frame

        frame = bbc_news_frame(n_per_topic=None, seed=seed)
        if len(frame) >= n:
            rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
            return frame["text"].iloc[rows].tolist(), f"BBC News demo corpus ({n} of {len(frame)} articles)"
    except Exception as exc:  # noqa: BLE001 - fall back to synthetic texts
        print(f"(demo corpus unavailable: {exc}; using synthetic texts)")
    rng = np.random.default_rng(seed)
    words = [
        "market",
        "team",
        "film",
        "election",
        "phone",
        "growth",
        "goal",
        "album",
        "minister",
        "software",
        "bank",
        "player",
        "music",
        "vote",
    ]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(20, 200)))) for _ in range(n)]
    return texts, f"synthetic ({n} texts of 20–200 words)"


def run(model_ids: list[str], texts: list[str], n_large: int, batch_size: int) -> list[dict[str, object]]:
    rows = []
    for model_id in model_ids:
        if not is_available(model_id):
            print(f"{model_id}: not installed, skipped")
            continue
        subset = texts[:n_large] if model_id in LARGE else texts
        corpus_hash = texts_hash(subset)
        with tempfile.TemporaryDirectory(prefix="flare-bench-") as cache_dir:
            start = time.perf_counter()
            encoder = load_encoder(model_id, corpus_texts=subset)
            load_s = time.perf_counter() - start
            start = time.perf_counter()
            cold = embed(encoder, subset, corpus_hash=corpus_hash, cache_dir=cache_dir, batch_size=batch_size)
            cold_s = time.perf_counter() - start
            start = time.perf_counter()
            cached = embed(
                encoder, subset, corpus_hash=corpus_hash, cache_dir=cache_dir, batch_size=batch_size
            )
            cached_s = time.perf_counter() - start
        assert np.array_equal(cold, cached)
        rows.append(
            {
                "model": model_id,
                "n": len(subset),
                "dim": cold.shape[1],
                "load_s": load_s,
                "cold_tps": len(subset) / cold_s,
                "cached_tps": len(subset) / cached_s,
                "ratio": cold_s / cached_s,
            }
        )
        print(f"  {model_id}: done ({cold_s:.1f} s cold)", flush=True)
        del encoder
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="texts per model (default 1000)")
    parser.add_argument(
        "--n-transformer-large", type=int, default=1000, help="texts for all-mpnet-base-v2 (default: --n)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--controls", action="store_true", help="also time the control models")
    parser.add_argument("--models", nargs="*", help="only these model ids")
    args = parser.parse_args(argv)
    texts, origin = bench_texts(args.n)
    ids = args.models or list(BUILTIN_IDS) + (list(CONTROL_IDS) if args.controls else [])
    import torch

    print(f"texts: {origin}; mean {np.mean([len(t) for t in texts]):.0f} characters")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cpu count {os.cpu_count()}")
    rows = run(ids, texts, min(args.n_transformer_large, args.n), args.batch_size)
    print()
    header = f"{'model':<26} {'n':>5} {'dim':>4} {'load s':>7} {'cold texts/s':>13} {'cached texts/s':>15} {'cached/cold':>12}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['model']:<26} {r['n']:>5} {r['dim']:>4} {r['load_s']:>7.1f} {r['cold_tps']:>13.1f} "
            f"{r['cached_tps']:>15.0f} {r['ratio']:>11.0f}x"
        )


if __name__ == "__main__":
    main()
