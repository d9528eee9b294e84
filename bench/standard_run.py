"""Benchmark: the two standard runs, timed per stage, against the figures kept in ``bench/standard_run.json``.

Usage::

    python bench/standard_run.py                    # both cases, cold cache for the demo
    python bench/standard_run.py --case standard    # 7 candidates + 2 controls × 2,000 short texts, defaults
    python bench/standard_run.py --case demo --save # the first-launch demo; keep these figures as the reference
    python bench/standard_run.py --case pool        # every available trained candidate (16) × 2,000 texts

``demo`` is :func:`flare_core.run.demo.ensure_demo_run` from an empty cache (model unpacking, corpus,
every stage); ``standard`` is a default run (both estimators, collapse, maps, validation) of seven
candidates on the 2,000 rotten-tomatoes snippets of the validity benchmark, embeddings cached or not as
the cache has them; ``pool`` is the same default run with every available trained candidate of the
registry (16 on a full install) and ``pool-lean`` the same without the maps and the token-level stages. Prints each stage's seconds, the ratio to the reference figures (below 1: faster),
the wall time, the peak resident memory of this process and of its worker processes, and how good the
time-left estimate was: the share of the estimates (read from the manifest every second, as the pages do)
within ±30% of the time that was in fact left, between 20% and 90% of the wall time. Timings on a
shared machine are noisy: compare ratios from runs on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REFERENCE = Path(__file__).with_name("standard_run.json")
STANDARD_MODELS = [
    "all-MiniLM-L6-v2",
    "all-mpnet-base-v2",
    "paraphrase-MiniLM-L3-v2",
    "glove-6b-50d",
    "tokenlearn-static-64d",
    "tfidf-svd-256",
    "all-MiniLM-L6-v2-layer3",
]


def pool_models() -> list[str]:
    """Every available trained candidate of the registry."""
    from flare_core.encoders import is_available, list_models

    return [s.id for s in list_models() if s.role == "candidate" and is_available(s.id)]


def _peak_mib() -> dict[str, float]:
    """Peak resident memory of this process and of its largest worker, and the CPU seconds of both (on a
    shared machine the wall time stretches with the load; on a quiet 2-core machine it lies between half
    the CPU seconds and all of them)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return {
        "peak_rss_mib": round(own.ru_maxrss / 1024, 1),
        "peak_rss_workers_mib": round(children.ru_maxrss / 1024, 1),
        "cpu_s": round(cpu, 1),
    }


class EtaSampler:
    """Reads the time left of the run in ``runs_dir`` every second while it runs (a context manager);
    :meth:`figures` judges the estimates against the time that was in fact left."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir, self.samples = runs_dir, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> EtaSampler:
        self.start = time.time()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = time.time()
        self.stop.set()
        self.thread.join()

    def _poll(self) -> None:
        from flare_core.run.eta import manifest_remaining_seconds

        while not self.stop.wait(1.0):
            for path in self.runs_dir.glob("*/manifest.json"):
                try:
                    manifest = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if manifest.get("status") == "running":
                    now = time.time()
                    self.samples.append((now, manifest_remaining_seconds(manifest, now)))

    def figures(self, low: float = 0.2, high: float = 0.9) -> dict:
        wall = self.end - self.start
        errors = [
            abs(estimate - (self.end - t)) / (self.end - t)
            for t, estimate in self.samples
            if estimate is not None and low <= (t - self.start) / wall <= high
        ]
        within = sum(e <= 0.3 for e in errors)
        return {
            "eta_samples": len(errors),
            "eta_within_30pct": round(within / len(errors), 3) if errors else None,
            "eta_worst_error": round(max(errors), 3) if errors else None,
        }


def time_demo(runs_dir: Path) -> dict:
    from flare_core.run.demo import ensure_demo_run
    from flare_core.store.runs import RunStore

    start = time.perf_counter()
    with EtaSampler(runs_dir) as eta:
        run_id = ensure_demo_run(RunStore(runs_dir), background=False)
    wall = time.perf_counter() - start
    run = RunStore(runs_dir).get(run_id)
    return {"wall_s": round(wall, 1), "status": run.status, "stages": run.manifest.get("timings", {})} | (
        eta.figures()
    )


def time_standard(runs_dir: Path, models: list[str] | None = None, **options: object) -> dict:
    from flare_core.benchmark.suite import make_run
    from flare_core.data.benchmark_corpora import load_benchmark_corpus
    from flare_core.run import jobs
    from flare_core.run.params import build_params
    from flare_core.store.runs import RunStore

    bench = load_benchmark_corpus("rotten-tomatoes")
    run = make_run(RunStore(runs_dir), bench, build_params(models=models or STANDARD_MODELS, **options))
    start = time.perf_counter()
    with EtaSampler(runs_dir) as eta:
        status = jobs.run_in_process(run)
    wall = time.perf_counter() - start
    return {"wall_s": round(wall, 1), "status": status, "stages": run.manifest.get("timings", {})} | (
        eta.figures()
    )


def _print(case: str, figures: dict, reference: dict | None) -> None:
    print(f"\n{case}: {figures['status']}, wall {figures['wall_s']:.0f} s", end="")
    if reference:
        print(
            f" (reference {reference['wall_s']:.0f} s, ratio {figures['wall_s'] / reference['wall_s']:.2f})"
        )
    else:
        print(" (no reference figures)")
    ref_stages = (reference or {}).get("stages", {})
    for stage, seconds in figures["stages"].items():
        ref = ref_stages.get(stage)
        ratio = f"{seconds / ref:.2f}" if ref else "–"
        print(
            f"  {stage:<22} {seconds:8.1f} s   reference {ref if ref is not None else '–':>8}   ratio {ratio}"
        )
    print(
        f"  peak memory: {figures['peak_rss_mib']:.0f} MiB here, {figures['peak_rss_workers_mib']:.0f} MiB in a worker; "
        f"CPU {figures.get('cpu_s', 0):.0f} s (this process and its workers)"
    )
    if figures.get("eta_samples"):
        print(
            f"  time left within ±30% in {figures['eta_within_30pct']:.0%} of {figures['eta_samples']} readings "
            f"from 20% to 90% of the run (worst {figures['eta_worst_error']:.0%} off)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", choices=["demo", "standard", "both", "pool", "pool-lean"], default="both")
    parser.add_argument("--save", action="store_true", help="keep these figures as the new reference")
    parser.add_argument("--warm-demo", action="store_true", help="use the current cache for the demo")
    args = parser.parse_args()
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.case in ("demo", "both"):
            if not args.warm_demo:
                os.environ["FLARE_CACHE_DIR"] = str(Path(tmp) / "cold-cache")
            results["demo"] = time_demo(Path(tmp) / "demo-runs") | _peak_mib()
            os.environ.pop("FLARE_CACHE_DIR", None)
        if args.case in ("standard", "both"):
            results["standard"] = time_standard(Path(tmp) / "standard-runs") | _peak_mib()
        if args.case in ("pool", "pool-lean"):
            lean = {"maps": False, "collapse": False} if args.case == "pool-lean" else {}
            results[args.case] = time_standard(Path(tmp) / "pool-runs", pool_models(), **lean) | _peak_mib()
    for case, figures in results.items():
        _print(case, figures, reference.get(case))
    if args.save:
        for case, figures in results.items():
            reference[case] = figures | {"measured": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
        REFERENCE.write_text(json.dumps(reference, indent=2) + "\n")
        print(f"\nsaved as the reference: {REFERENCE}")


if __name__ == "__main__":
    main()
