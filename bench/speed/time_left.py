"""Benchmark: how good the time left is, read every second as the pages read it, on four kinds of run.

Usage::

    python bench/speed/time_left.py                      # the four cases below, 4 candidates × 500 texts
    python bench/speed/time_left.py --texts 300 --cases fresh-quiet,cached-load
    python bench/speed/time_left.py --save bench/speed/time_left.json

Each case is a real run (``flare_core.run.jobs.run_in_process``) of four quick candidates and the default
controls on the first ``--texts`` rotten-tomatoes snippets, every stage on (both estimators, maps,
collapse), in one cache folder of its own:

- ``fresh-quiet``: an empty embedding cache, nothing else running from here;
- ``cached-quiet``: the same corpus again: every embedding is read back from the cache;
- ``fresh-load`` and ``cached-load``: the same with a CPU load beside the run: one busy Python process
  per core, started as the run starts and stopped as it ends (a shared machine).

Before them, one run that is not judged (``--warm-up``, on the next ``--texts`` snippets) leaves this
machine's model and stage speeds in the bench's cache folder, as any earlier run would; the fresh cases
then empty the embedding cache alone (a person's new corpus). ``--no-warm-up`` judges a machine's very
first run too (priors only, in the first case). Each reading
(``manifest_remaining_seconds`` of the manifest, once a second while the run runs) is judged against the
time that was in fact left: the share within ±30% over every reading from the first estimate, and over
the readings from 20% to 90% of the run (the figure of ``standard_run.py``).

The machine's load average at the start of each case is printed beside it: on a shared machine the
figures move with what else runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODELS = ["paraphrase-MiniLM-L3-v2", "glove-6b-50d", "tokenlearn-static-64d", "all-MiniLM-L6-v2"]
CASES = ["fresh-quiet", "cached-quiet", "fresh-load", "cached-load"]


def _busy(stop: multiprocessing.synchronize.Event) -> None:
    """One core's worth of load: a Python loop until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


class Load:
    """``n`` busy processes while the block runs (none with ``n`` 0)."""

    def __init__(self, n: int) -> None:
        self.stop = multiprocessing.Event()
        self.procs = [multiprocessing.Process(target=_busy, args=(self.stop,), daemon=True) for _ in range(n)]

    def __enter__(self) -> Load:
        for proc in self.procs:
            proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self.procs:
            proc.join(timeout=10)


def judge(samples: list[tuple[float, float | None]], start: float, end: float) -> dict:
    """The share of ``samples`` ((time, estimate)) within ±30% of ``end - time``: from the first estimate,
    and from 20% to 90% of the run; the worst error of each and how many readings there were."""
    wall = end - start
    every = [(t, e) for t, e in samples if e is not None and end - t > 0]
    window = [(t, e) for t, e in every if 0.2 <= (t - start) / wall <= 0.9]

    def share(rows: list[tuple[float, float]]) -> tuple[float | None, float | None]:
        errors = [abs(e - (end - t)) / (end - t) for t, e in rows]
        if not errors:
            return None, None
        return round(sum(x <= 0.3 for x in errors) / len(errors), 3), round(max(errors), 3)

    within_all, worst_all = share(every)
    within_window, worst_window = share(window)
    first = next((t - start for t, e in samples if e is not None), None)
    return {
        "wall_s": round(wall, 1),
        "readings": len(every),
        "within_30pct": within_all,
        "worst_error": worst_all,
        "readings_20_90": len(window),
        "within_30pct_20_90": within_window,
        "worst_error_20_90": worst_window,
        "first_estimate_s": None if first is None else round(first, 1),
    }


def recording_sampler(runs_dir: Path):
    """An :class:`~bench.speed.standard_run.EtaSampler` that also keeps the stage records of each reading
    (``stages`` of the manifest at ``now``): the case can be replayed against another estimator, as
    ``tests/run/recorded/eta_500_texts.json`` is."""
    from bench.speed.standard_run import EtaSampler

    class Recording(EtaSampler):
        def __init__(self, root: Path) -> None:
            super().__init__(root)
            self.states: list[dict] = []

        def _moments(self, run_path: Path, manifest: dict, now: float) -> None:
            if not self.states or now - self.states[-1]["now"] >= 1.0:
                self.states.append({"now": now, "stages": manifest.get("stages", {})})
            super()._moments(run_path, manifest, now)

    return Recording(runs_dir)


def one_case(case: str, texts: int, cache: Path, runs: Path, offset: int = 0) -> dict:
    from flare_core.benchmark.suite import make_run
    from flare_core.data.benchmark_corpora import load_benchmark_corpus
    from flare_core.run import jobs
    from flare_core.run.params import build_params
    from flare_core.store.runs import RunStore

    fresh, loaded = case.startswith("fresh"), case.endswith("load")
    if fresh:
        shutil.rmtree(cache / "embeddings", ignore_errors=True)
    full = load_benchmark_corpus("rotten-tomatoes")
    frame = full.frame.iloc[offset : offset + texts].reset_index(drop=True)
    bench = dataclasses.replace(full, frame=frame)
    store = RunStore(runs / case)
    run = make_run(store, bench, build_params(models=MODELS))
    load_average = os.getloadavg()[0]
    print(f"{case}: load average {load_average:.2f} at the start", flush=True)
    with Load((os.cpu_count() or 1) if loaded else 0), recording_sampler(store.root) as eta:
        status = jobs.run_in_process(run)
    figures = judge(eta.samples, eta.start, eta.end)
    recording = {
        "started": run.manifest.get("started"),
        "finished": run.manifest.get("finished"),
        "plan": run.manifest.get("plan"),
        "readings": eta.states,
    }
    plan = {
        row["name"]: round(row["units"] * row["prior_seconds"] + row.get("fixed_seconds", 0), 1)
        for row in run.manifest.get("plan", [])
    }
    return figures | {
        "status": status,
        "load_average_at_start": round(load_average, 2),
        "planned_s": plan,
        "stages_s": run.manifest.get("timings", {}),
        "readings_s": [[round(t - eta.start, 1), None if e is None else round(e, 1)] for t, e in eta.samples],
        "recording": recording,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--texts", type=int, default=500)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--save", type=Path, default=None, help="write every figure and reading as JSON here")
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="write each case's plan and stage records at every reading as JSON here (for replays)",
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="no run before the judged ones: the first starts from priors",
    )
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases: {', '.join(unknown)}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        os.environ["FLARE_CACHE_DIR"] = str(cache)
        models = Path.home() / ".cache" / "flare-studio" / "models"
        if models.is_dir():  # the unpacked and distilled models as installed: only embeddings start empty
            from bench.speed.standard_run import link_models

            link_models(models.parent, cache)
        if not args.no_warm_up:  # this machine's speeds, as an earlier run leaves them
            warm = one_case("fresh-quiet", args.texts, cache, Path(tmp) / "warm-up", offset=args.texts)
            results["warm-up"] = warm | {"judged": False}
            print(f"warm-up run (not judged): {warm['status']} in {warm['wall_s']:.0f} s", flush=True)
        for case in cases:
            results[case] = one_case(case, args.texts, cache, Path(tmp) / "runs")
            r = results[case]
            print(
                f"{case}: {r['status']} in {r['wall_s']:.0f} s; time left within ±30% in "
                f"{r['within_30pct']:.0%} of {r['readings']} readings (worst {r['worst_error']:.0%} off), "
                f"{r['within_30pct_20_90']:.0%} of {r['readings_20_90']} from 20% to 90% of the run; "
                f"first estimate after {r['first_estimate_s']} s",
                flush=True,
            )
            if args.save is not None:  # after each case: a long bench stopped early keeps what it measured
                figures = {c: {k: v for k, v in r.items() if k != "recording"} for c, r in results.items()}
                args.save.write_text(json.dumps({"texts": args.texts, "models": MODELS, "cases": figures}))
            if args.record is not None:  # every reading's stage records, to replay against another estimator
                recordings = {c: r["recording"] for c, r in results.items()}
                args.record.write_text(json.dumps(recordings))
    if args.save is not None:
        print(f"saved: {args.save}")


if __name__ == "__main__":
    main()
