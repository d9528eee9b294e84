"""Benchmark: the two standard runs, timed per stage, against the figures kept in
``bench/speed/standard_run.json``.

Usage::

    python bench/speed/standard_run.py                    # both cases, cold cache for the demo
    python bench/speed/standard_run.py --case standard    # 7 candidates + 2 controls × 2,000 short texts, defaults
    python bench/speed/standard_run.py --case demo --save # the first-launch demo; keep these figures as the reference
    python bench/speed/standard_run.py --case pool        # every available trained candidate (16) × 2,000 texts

``demo`` is :func:`flare_core.run.demo.ensure_demo_run` from an empty cache (model unpacking, corpus,
every stage); ``standard`` is a default run (both estimators, collapse, maps, validation) of seven
candidates on the 2,000 rotten-tomatoes snippets of the validity benchmark, embeddings cached or not as
the cache has them; ``pool`` is the same default run with every available trained candidate of the
registry (16 on a full install) and ``pool-lean`` the same without the maps and the token-level stages.
``--unlabelled`` gives the runs the texts alone (a person with no labels: the answer is the label-free
rule's, then the few-label check's); ``--cold`` starts them from an empty embedding cache.

Prints each stage's seconds, the ratio to the reference figures (below 1: faster), the wall time, the
peak resident memory of this process and of its worker processes, how good the time-left estimate was
(the share of the estimates, read from the manifest every second as the pages do, within ±30% of the time
that was in fact left, between 20% and 90% of the wall time), and two moments of the run:

- **answer usable** (``answer_s``): the first reading (every 0.25 s) at which the run's ``verdict.json``
  names a model (its ``recommended``) and rests on the ground the run will end with when the corpus came
  with labels, scored pairs or search judgements (basis ``labels``). Slower candidates may still be
  embedding then: the verdict lists them as ``pending`` and is written again as each joins. From then on
  the Overview shows the answer, and ``flare label RUN --next 16`` and *Check with a few labels* choose
  texts from the candidates embedded so far. For a run without labels the benchmark then runs ``flare label
  RUN --next 16`` once, as a person would, and reports when it first returned its texts
  (``label_next_s``);
- **every candidate embedded** (``all_candidates_s``): the first reading at which every candidate of the
  manifest is stored or failed (the verdict is then written without pending candidates);
- **done** (``wall_s``): the run has finished every stage; with ``--stop-after answer`` (or
  ``candidates``) the run is cancelled once ``flare label --next`` has returned (and, with ``candidates``,
  every candidate is embedded), and ``wall_s`` is the time to that stop (status ``cancelled``).

``--cold`` points ``FLARE_CACHE_DIR`` at an empty folder: no embedding is cached, the all-mpnet-base-v2
parts are unpacked again and the distilled static models (m2v-*) are built again on first use. The
installed model packages and the word vectors stay as installed. ``--models-from CACHE`` links the
unpacked and distilled models of the cache folder ``CACHE`` into that empty cache: only the embeddings
start empty (each model's build is then measured apart from the run).

Timings on a shared machine are noisy: compare ratios from runs on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
    """Reads the run in ``runs_dir`` every 0.25 s while it runs (a context manager): its time left (once a
    second) and the moment its answer became usable (see the module docstring). :meth:`figures` judges
    the estimates against the time that was in fact left and gives that moment."""

    def __init__(self, runs_dir: Path, *, try_labelling: bool = False, stop_after: str | None = None) -> None:
        self.runs_dir, self.samples = runs_dir, []
        self.try_labelling, self.stop_after = try_labelling, stop_after
        self.answer_at: float | None = None
        self.all_candidates_at: float | None = None
        self.answer: dict = {}  # the model the first usable answer named, and how many were pending
        self.stopped = False
        self.label_next_at: float | None = None
        self.label_next_error = ""
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

        last_eta = 0.0
        while not self.stop.wait(0.25):
            for path in self.runs_dir.glob("*/manifest.json"):
                try:
                    manifest = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if manifest.get("status") != "running":
                    continue
                now = time.time()
                if now - last_eta >= 1.0:
                    last_eta = now
                    self.samples.append((now, manifest_remaining_seconds(manifest, now)))
                self._moments(path.parent, manifest, now)

    def _moments(self, run_path: Path, manifest: dict, now: float) -> None:
        """Note the answer's moment and every candidate's; stop the run where ``stop_after`` says."""
        if self.all_candidates_at is None and candidates_embedded(manifest):
            self.all_candidates_at = now
            print(f"every candidate embedded after {now - self.start:.1f} s", flush=True)
        if self.answer_at is None and answer_usable(run_path, manifest):
            self.answer_at = now
            verdict = json.loads((run_path / "verdict.json").read_text())
            self.answer = {"model": verdict.get("recommended"), "pending": len(verdict.get("pending") or [])}
            print(
                f"answer usable after {now - self.start:.1f} s: {self.answer['model']}, "
                f"{self.answer['pending']} candidates still pending",
                flush=True,
            )
            if self.try_labelling:
                self._label_next(run_path)
        reached = {"answer": [self.answer_at], "candidates": [self.answer_at, self.all_candidates_at]}
        if self.stop_after and None not in reached[self.stop_after] and not self.stopped:
            from flare_core.store.runs import RunStore

            self.stopped = True
            RunStore(run_path.parent).get(run_path.name).request_cancel()

    def _label_next(self, run_path: Path) -> None:
        """``flare label RUN --next 16`` as a person would run it, timed to the moment it returned."""
        env = dict(os.environ, FLARE_RUNS_DIR=str(run_path.parent))
        proc = subprocess.run(
            [sys.executable, "-m", "flare_core.cli", "label", run_path.name, "--next", "16"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if proc.returncode == 0 and proc.stdout.count("\n") > 16:
            self.label_next_at = time.time()
        else:
            self.label_next_error = (proc.stderr.strip().splitlines() or ["no texts"])[-1]

    def figures(self, low: float = 0.2, high: float = 0.9) -> dict:
        wall = self.end - self.start
        errors = [
            abs(estimate - (self.end - t)) / (self.end - t)
            for t, estimate in self.samples
            if estimate is not None and low <= (t - self.start) / wall <= high
        ]
        within = sum(e <= 0.3 for e in errors)
        since = lambda t: None if t is None else round(t - self.start, 1)  # noqa: E731
        figures = {
            "answer_s": since(self.answer_at),
            "all_candidates_s": since(self.all_candidates_at),
            "answer_model": self.answer.get("model"),
            "answer_pending": self.answer.get("pending"),
            "eta_samples": len(errors),
            "eta_within_30pct": round(within / len(errors), 3) if errors else None,
            "eta_worst_error": round(max(errors), 3) if errors else None,
        }
        if self.try_labelling:
            figures["label_next_s"] = since(self.label_next_at)
            if self.label_next_error:
                figures["label_next_error"] = self.label_next_error
        return figures


def candidates_embedded(manifest: dict) -> bool:
    """Whether every candidate of ``manifest`` is stored or failed."""
    candidates = [m for m in manifest.get("models", []) if m.get("role", "candidate") == "candidate"]
    return all(m.get("status") in ("done", "failed") for m in candidates)


def answer_usable(run_path: Path, manifest: dict) -> bool:
    """Whether the run at ``run_path`` has a usable answer (see the module docstring): ``verdict.json``
    names a model, on the labels when the run has labels of any kind (candidates may still be pending)."""
    try:
        verdict = json.loads((run_path / "verdict.json").read_text())
    except (OSError, ValueError):
        return False
    if not verdict.get("recommended"):
        return False
    labelled = manifest.get("corpus", {}).get("has_labels") or any(
        (run_path / name).is_file() for name in ("pairs.parquet", "judgements.parquet")
    )
    return not labelled or verdict.get("basis") == "labels"


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


def time_standard(
    runs_dir: Path,
    models: list[str] | None = None,
    *,
    unlabelled: bool = False,
    stop_after: str | None = None,
    **options: object,
) -> dict:
    from flare_core.benchmark.suite import make_run
    from flare_core.data.benchmark_corpora import load_benchmark_corpus
    from flare_core.run import jobs
    from flare_core.run.params import build_params
    from flare_core.store.runs import RunStore

    bench = load_benchmark_corpus("rotten-tomatoes")
    params = build_params(models=models or STANDARD_MODELS, **options)
    store = RunStore(runs_dir)
    run = _texts_only_run(store, bench, params) if unlabelled else make_run(store, bench, params)
    start = time.perf_counter()
    with EtaSampler(runs_dir, try_labelling=unlabelled, stop_after=stop_after) as eta:
        status = jobs.run_in_process(run)
    wall = time.perf_counter() - start
    figures = {"wall_s": round(wall, 1), "status": status, "stages": run.manifest.get("timings", {})}
    if READINGS["path"] is not None:  # every time-left reading beside the run's plan and stage times
        READINGS["path"].write_text(json.dumps({
            "readings": [[round(t - eta.start, 2), e, round(eta.end - t, 2)] for t, e in eta.samples],
            "manifest": run.manifest,
        }, default=str))  # fmt: skip
    return figures | {"unlabelled": unlabelled} | eta.figures()


#: Where ``--readings`` keeps the time-left readings of the last standard or pool run (None: nowhere).
READINGS: dict[str, Path | None] = {"path": None}


def _texts_only_run(store, bench, params):
    """The run of ``bench``'s texts alone, read from a CSV of one column as a person's upload would be."""
    from flare_core.data.corpus import load_corpus
    from flare_core.run.create import create_run

    path = store.root / f"{bench.name}-texts.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    bench.frame[["text"]].to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column=None, pair_columns=None)
    return create_run(store, corpus, params, name=f"benchmark {bench.name}, texts only")


def link_models(source: Path, cache: Path) -> list[str]:
    """Link each unpacked model (``models/<name>``) and each distilled one (``models/distil/<name>``) of
    the cache folder ``source`` into the cache folder ``cache``; returns their names. A model built in
    ``cache`` later is written there, not into ``source``."""
    models = source.expanduser() / "models"
    if not models.is_dir():
        raise SystemExit(f"{source} has no models folder to link")
    linked = []
    for folder in sorted(p for p in models.iterdir() if p.is_dir()):
        inner = sorted(folder.iterdir()) if folder.name == "distil" else [folder]
        for entry in inner:
            target = cache / entry.relative_to(source.expanduser())
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(entry.resolve(), target_is_directory=True)
            linked.append(entry.name)
    print(f"models linked from {source}: {', '.join(linked)}", flush=True)
    return linked


def _print(case: str, figures: dict, reference: dict | None) -> None:
    print(f"\n{case}: {figures['status']}, wall {figures['wall_s']:.0f} s", end="")
    if reference:
        print(
            f" (reference {reference['wall_s']:.0f} s, ratio {figures['wall_s'] / reference['wall_s']:.2f})"
        )
    else:
        print(" (no reference figures)")
    if figures.get("answer_s") is not None:
        ref = (reference or {}).get("answer_s")
        print(
            f"  answer usable after {figures['answer_s']:.0f} s"
            + (f" (reference {ref:.0f} s)" if ref else "")
            + f": {figures.get('answer_model')}, {figures.get('answer_pending') or 0} candidates still pending"
            + f"; {figures['status']} after {figures['wall_s']:.0f} s"
        )
    if figures.get("all_candidates_s") is not None:
        print(f"  every candidate embedded after {figures['all_candidates_s']:.0f} s")
    if "label_next_s" in figures:
        took = figures["label_next_s"]
        print(
            f"  flare label --next 16 first returned its texts after {took:.0f} s"
            if took is not None
            else f"  flare label --next 16 did not work: {figures.get('label_next_error', '')}"
        )
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
    parser.add_argument(
        "--unlabelled", action="store_true", help="standard and pool runs of the texts alone (no labels)"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="standard and pool runs from an empty cache too (embeddings, unpacked and distilled models)",
    )
    parser.add_argument(
        "--models-from",
        type=Path,
        default=None,
        metavar="CACHE",
        help="with --cold: link the unpacked and distilled models of this cache folder into the empty cache",
    )
    parser.add_argument(
        "--stop-after",
        choices=["answer", "candidates"],
        default=None,
        help="cancel the standard or pool run once its answer is usable (and flare label --next has "
        "returned), or once it is and every candidate is embedded",
    )
    parser.add_argument(
        "--readings", type=Path, default=None,
        help="write the run's time-left readings (seconds in, estimate, seconds in fact left) and its manifest",
    )  # fmt: skip
    args = parser.parse_args()
    READINGS["path"] = args.readings
    if args.save and args.stop_after:
        parser.error("--save keeps whole runs as the reference: leave out --stop-after")
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.case in ("demo", "both"):
            if not args.warm_demo:
                os.environ["FLARE_CACHE_DIR"] = str(Path(tmp) / "cold-cache")
            results["demo"] = time_demo(Path(tmp) / "demo-runs") | _peak_mib()
            os.environ.pop("FLARE_CACHE_DIR", None)
        if args.cold:
            os.environ["FLARE_CACHE_DIR"] = str(Path(tmp) / "cold-cache-runs")
            if args.models_from is not None:
                link_models(args.models_from, Path(tmp) / "cold-cache-runs")
        suffix = "-unlabelled" if args.unlabelled else ""
        if args.case in ("standard", "both"):
            figures = time_standard(
                Path(tmp) / "standard-runs", unlabelled=args.unlabelled, stop_after=args.stop_after
            )
            results["standard" + suffix] = figures | _peak_mib()
        if args.case in ("pool", "pool-lean"):
            lean = {"maps": False, "collapse": False} if args.case == "pool-lean" else {}
            figures = time_standard(
                Path(tmp) / "pool-runs", pool_models(), unlabelled=args.unlabelled,
                stop_after=args.stop_after, **lean,
            )  # fmt: skip
            results[args.case + suffix] = figures | _peak_mib()
    for case, figures in results.items():
        _print(case, figures, reference.get(case))
    if args.save:
        for case, figures in results.items():
            reference[case] = figures | {"measured": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
        REFERENCE.write_text(json.dumps(reference, indent=2) + "\n")
        print(f"\nsaved as the reference: {REFERENCE}")


if __name__ == "__main__":
    main()
