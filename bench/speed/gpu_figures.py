"""Benchmark: the pool's stages on a GPU against the CPU of the same machine, on the same inputs.

Usage::

    python bench/speed/gpu_figures.py --assets DIR --out figures.json         # all parts, in order
    python bench/speed/gpu_figures.py --assets DIR --parts flows --budget 300  # one part, within 300 s

``DIR`` holds ``texts.json`` (a list of texts) and one folder per transformer architecture
(``minilm/``, ``mpnet/``) with its ``config.json`` and tokenizer files (no weights needed).

Parts, each timed on CUDA and on the CPU of the same machine (all its cores):

- ``embed``: texts per second of the pool's transformer architectures through
  :func:`flare_core.encoders.embed` (half precision on CUDA, as a run does). The weights are freshly
  initialised from each model's own config: the arithmetic, and so the time, is that of the trained model.
- ``flows``: the flow sufficiency matrix of 16 models × ``--n`` texts at the pool's 16 widths
  (a synthetic pool, :func:`bench.sufficiency_matrix.synthetic_pool`; every embedding is whitened to the
  preset's width first, so the time depends on the widths and not on what the vectors mean), for the
  ``fast``, ``default`` and ``paper`` presets: on the CPU as a run does on a many-core machine (a pool of
  worker processes, one torch thread each), and on CUDA in one process, one conditional at a time and
  with all the conditionals of a target batched into one model (``batch_conditionals``). The largest IS
  difference between the CPU and the CUDA matrices says whether the figures agree.
- ``few_labels``: one update of the few-label answer (:func:`flare_core.choosing.probes.few_label_estimates`)
  for 16 models, 2,000 texts, 32 labels (numpy, CPU).

Each measurement runs only while the ``--budget`` (seconds) lasts; what was not measured is written as
skipped. Results are written to ``--out`` after each measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.run.params import PRESET_MAX_DIMS  # noqa: E402

#: The widths of the 16 trained candidates of the pool (``flare models``).
POOL_WIDTHS = [384, 768, 384, 384, 50, 64, 256, 100, 512, 100, 256, 64, 256, 64, 256, 64]


class Figures:
    """The results so far, written to disk after each one."""

    def __init__(self, path: Path, budget: float) -> None:
        self.path, self.start, self.budget = path, time.perf_counter(), budget
        self.rows: list[dict] = []
        self.meta = _machine()

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.start)

    def add(self, **row) -> None:
        self.rows.append(row)
        print(json.dumps(row), flush=True)
        self.path.write_text(json.dumps({"machine": self.meta, "rows": self.rows}, indent=1))


def _machine() -> dict:
    import torch

    meta = {"torch": torch.__version__, "cpu_count": os.cpu_count(), "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        meta["gpu"] = torch.cuda.get_device_name(0)
    return meta


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def embed_part(figures: Figures, assets: Path, devices: list[str], n: int) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from flare_core.encoders import embed, random_init_transformer

    texts = json.loads((assets / "texts.json").read_text())[:n]
    for arch in ("minilm", "mpnet"):
        folder = assets / arch
        config = AutoConfig.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        for device in devices:
            if figures.left() < 30:
                figures.add(part="embed", arch=arch, device=device, skipped="budget")
                continue
            encoder = random_init_transformer(config, tokenizer, device=device, max_length=128)
            # CUDA picks its kernels on the first batches of each shape: warm up on all of them there
            warm = texts if device.startswith("cuda") else texts[:64]
            embed(encoder, warm, corpus_hash="warm-up", cache_dir=None, batch_size=64)
            _sync(device)
            start = time.perf_counter()
            out = embed(encoder, texts, corpus_hash=f"bench-{arch}", cache_dir=None, batch_size=64)
            _sync(device)
            seconds = time.perf_counter() - start
            figures.add(
                part="embed",
                arch=arch,
                device=device,
                texts=len(texts),
                dim=int(out.shape[1]),
                seconds=round(seconds, 2),
                texts_per_s=round(len(texts) / seconds, 1),
            )
            del encoder


def _flows_once(pool, preset: str, device: str, workers: int, batch: int):
    from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix
    from flare_core.compute import LocalExecutor

    base = FlowConfig.fast() if preset == "fast" else FlowConfig()
    config = dataclasses.replace(base, batch_conditionals=batch)
    executor = LocalExecutor(workers=workers, threads_per_worker=1) if workers > 1 else None
    start = time.perf_counter()
    try:
        result = sufficiency_matrix(
            pool,
            config=config,
            device=device,
            seed=0,
            executor=executor,
            max_dims=PRESET_MAX_DIMS[preset],
        )
    finally:
        if executor is not None:
            executor.close()
    _sync(device)
    return time.perf_counter() - start, result.is_matrix.to_numpy()


def flows_part(
    figures: Figures, n: int, presets: list[str], cuda: bool, cuda_plans: list[tuple[int, int]]
) -> None:
    from bench.speed.sufficiency_matrix import synthetic_pool

    pool, _ = synthetic_pool(n, POOL_WIDTHS, seed=0)
    cores = os.cpu_count() or 1
    k = len(pool) - 1
    plans = [(preset, "cpu", cores, 1) for preset in presets]
    if cuda:
        plans = [
            (preset, device, workers, k if batch == 0 else batch)
            for preset in presets
            for device, workers, batch in [("cpu", cores, 1)] + [("cuda", w, b) for w, b in cuda_plans]
        ]
    cpu_seconds: dict[str, float] = {}
    cpu_matrix: dict[str, np.ndarray] = {}
    for preset, device, workers, batch in plans:
        label = dict(
            part="flows",
            preset=preset,
            device=device,
            workers=workers,
            batch_conditionals=batch,
            models=len(pool),
            texts=n,
        )
        # one conditional at a time on CUDA is the slow plan: only where three CPU times are left
        needed = 3 * cpu_seconds.get(preset, 0.0) if (device, workers, batch) == ("cuda", 1, 1) else 20.0
        if figures.left() < needed or (device == "cuda" and preset not in cpu_matrix):
            figures.add(**label, skipped="budget")
            continue
        seconds, matrix = _flows_once(pool, preset, device, workers, batch)
        row = dict(label, seconds=round(seconds, 1))
        if device == "cpu":
            cpu_seconds[preset], cpu_matrix[preset] = seconds, matrix
        else:
            row["cpu_over_cuda"] = round(cpu_seconds[preset] / seconds, 2)
            row["max_abs_is_diff_vs_cpu"] = float(np.nanmax(np.abs(matrix - cpu_matrix[preset])))
            row["is_range"] = [float(np.nanmin(cpu_matrix[preset])), float(np.nanmax(cpu_matrix[preset]))]
        figures.add(**row)


def few_labels_part(figures: Figures, n: int) -> None:
    from bench.speed.sufficiency_matrix import synthetic_pool
    from flare_core.choosing.probes import few_label_estimates

    pool, _ = synthetic_pool(n, POOL_WIDTHS, seed=1)
    rng = np.random.default_rng(0)
    rows = rng.choice(n, 32, replace=False)
    labels = [f"class-{i % 3}" for i in range(32)]
    few_label_estimates(pool, rows[:16], labels[:16], seed=0)
    start = time.perf_counter()
    few_label_estimates(pool, rows, labels, seed=0)
    figures.add(
        part="few_labels",
        device="cpu",
        models=len(pool),
        texts=n,
        labels=32,
        seconds=round(time.perf_counter() - start, 2),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("gpu_figures.json"))
    parser.add_argument("--parts", default="embed,few_labels,flows")
    parser.add_argument("--presets", default="fast,default,paper")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument(
        "--cuda-plans",
        default="1x0,1x1",
        help="CUDA flows plans WORKERSxBATCH, comma-separated (BATCH 0: all conditionals of a target together)",
    )
    parser.add_argument("--embed-devices", default="cuda,cpu")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for all measurements")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    devices = ["cuda", "cpu"] if cuda else ["cpu"]
    figures = Figures(args.out, args.budget)
    print(json.dumps(figures.meta), flush=True)
    parts = args.parts.split(",")
    if "embed" in parts:
        embed_part(figures, args.assets, [d for d in args.embed_devices.split(",") if d in devices], args.n)
    if "few_labels" in parts:
        few_labels_part(figures, args.n)
    if "flows" in parts:
        cuda_plans = [tuple(int(v) for v in plan.split("x")) for plan in args.cuda_plans.split(",")]
        flows_part(figures, args.n, args.presets.split(","), cuda, cuda_plans)


if __name__ == "__main__":
    main()
