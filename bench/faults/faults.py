"""Fault injection: real runs, real processes, real signals and real files; one table of what survived.

Usage::

    python bench/faults/faults.py          # the full form: 20 seeded kills over every stage, and the rest
    python bench/faults/faults.py --short  # a few trials per fault (the test suite runs this, < 2 min)
    python bench/faults/faults.py --only kill,queue --kills 5 --seed 3

Faults:

- **kill**: SIGKILL of a run's worker process group at seeded random moments spread over every stage,
  then ``flare resume``: the run must finish with every result file byte-identical to an uninterrupted
  run, and no file a finished stage wrote may be written again (mtimes; the files every pass rewrites,
  such as the summary, are measured first and printed).
- **corrupt**: a truncated or garbage manifest, corpus, embedding, result Parquet and unit JSON in a
  stored run: ``flare doctor`` must name exactly that file, ``flare resume`` must recompute what the run
  can (identical results) and refuse the rest with the file named, and a second run of the store must
  stay readable and sound. A truncated or garbage ``tokens.npy``, ``offsets.npy`` or ``meta.json`` of a
  token store left in the cache's scratch folder: opening it must name that file, ``flare doctor`` must
  report it and ``--repair`` remove it, and a sound store beside it must stay as it was.
- **disk**: the run store on a 16 MiB tmpfs (root only; skipped otherwise) filled up when the run reaches
  its embeddings, or its information-sufficiency stage: the run must fail with "the disk is full" in
  words, leave no damaged or half-written file, and resume to the uninterrupted result once space is
  freed.
- **queue**: 4 runs submitted at once with ``FLARE_MAX_JOBS=2``: two wait, all start in submission order,
  never more than 2 execute, all finish with the numbers of a run alone. A second trial kills every
  worker while two runs wait (the app and its workers gone) and restarts with ``flare runs``.
- **load** (full form): the same 4 runs submitted while the dashboard runs and a headless Chromium
  reloads each page of a finished run every 2 s: every run must finish with the numbers of a run alone
  and the p95 page render time (navigation until the script has finished) must stay under 2 s.
- **concurrent**: two ``flare resume`` of one run at the same moment (one wins, the other is told);
  ``flare delete`` of a running run (refused); ``flare export`` and ``flare delete`` at the same moment;
  ``flare import`` of one bundle twice at the same moment.
- **big input**: a 2 GB sparse CSV refused at the size limit (peak memory printed), a large CSV sampled
  with ``max_rows=20000`` (peak memory printed).
- **long**: a run whose corpus holds one 10 MB text: it finishes with that text cut to
  ``MAX_TEXT_CHARS`` characters, the cut counted in the manifest and said by ``flare run``.

"data lost" counts trials where anything other than the injected damage was lost or changed. Time to
recover is the wall time of the command that brought the run back (median and maximum over trials).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.faults.fault_concurrency import concurrent_trials, load_trials, queue_trials  # noqa: E402
from bench.faults.fault_crashes import corruption_trials, kill_trials  # noqa: E402
from bench.faults.fault_resources import big_input_trials, disk_trials, long_text_trials  # noqa: E402
from bench.faults.fault_support import Reference, Row, finished_unit, params_for, print_table  # noqa: E402
from flare_core.store.runs import Run  # noqa: E402

__all__ = ["FAULTS", "finished_unit", "print_table", "run_faults"]


# -- main ---------------------------------------------------------------------------------------------------

FAULTS = ("kill", "corrupt", "disk", "queue", "load", "concurrent", "big", "long")


def run_faults(
    work: Path,
    *,
    short: bool,
    kills: int,
    seed: int,
    only: tuple[str, ...] = FAULTS,
    reference: Callable[..., Run] | None = None,
) -> tuple[list[Row], Reference]:
    """The rows of the faults in ``only``; ``reference`` builds the uninterrupted run they are compared with
    (see :class:`Reference`; by default it is computed here)."""
    from flare_core.data.demo import bbc_news_frame

    work.mkdir(parents=True, exist_ok=True)
    corpus_path = work / "corpus.csv"
    n_per_topic = 6 if short else 10
    bbc_news_frame(n_per_topic=n_per_topic, seed=0)[["text", "label"]].to_csv(corpus_path, index=False)
    ref = Reference(work, corpus_path, params_for(short), build=reference)
    trials = {
        "kill": lambda: kill_trials(ref, work, kills, seed, short),
        "corrupt": lambda: corruption_trials(ref, work, short),
        "disk": lambda: disk_trials(ref, work, short),
        "queue": lambda: queue_trials(ref, work, short),
        "load": lambda: load_trials(ref, work),
        "concurrent": lambda: concurrent_trials(ref, work, short),
        "big": lambda: big_input_trials(ref, work, short),
        "long": lambda: long_text_trials(ref, work, short),
    }
    rows = []
    for fault in FAULTS:
        if fault not in only or (fault == "load" and short and only == FAULTS):
            continue  # load: a browser and the app, in the full form or when asked for
        started = time.perf_counter()
        rows.append(trials[fault]())
        rows[-1].wall_s = time.perf_counter() - started
    return rows, ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="a few trials per fault (the test suite's form)")
    parser.add_argument("--kills", type=int, default=None, help="kill trials (default 20, short 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(FAULTS), help=f"comma-separated subset of {FAULTS}")
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the stores (default: a temp folder)"
    )
    args = parser.parse_args()
    kills = args.kills if args.kills is not None else (2 if args.short else 20)
    only = tuple(f.strip() for f in args.only.split(",") if f.strip())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flare-faults-") as tmp:
        work = args.work or Path(tmp)
        rows, ref = run_faults(work, short=args.short, kills=kills, seed=args.seed, only=only)
    if ref.built:  # the faults asked for compared their runs with an uninterrupted one
        print(f"reference run: {ref.seconds:.1f} s, stages {ref.timings}")
        print(f"files every pass rewrites (not counted as recomputed): {sorted(ref.rewritten)}")
    print_table(rows)
    print(f"total {time.perf_counter() - started:.0f} s")
    sys.exit(0 if all(r.survived == r.trials and r.lost == 0 for r in rows) else 1)


if __name__ == "__main__":
    main()
