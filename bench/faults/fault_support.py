"""What every fault trial of ``bench/faults/faults.py`` shares: a row of the table of what survived, the
``flare`` command run in a child process, the reference run (an uninterrupted run each trial's numbers are
compared with) and the files a finished stage wrote."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import Run, RunStore

MODELS = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]
# files that differ between two identical runs: timings inside them, the worker's own files, or locks
VOLATILE = (
    "manifest.json",
    "worker.log",
    "worker.heartbeat",
    "run.lock",
    ".run.lock.guard",
    ".run.lock.held",
    "labels.lock",
)
VOLATILE_UNDER = ("sufficiency/gmm/pairs/",)
VOLATILE_FILES = ("sufficiency/gmm/result/records.parquet", "sufficiency/gmm/result/marginals.parquet")


@dataclasses.dataclass
class Row:
    fault: str
    trials: int = 0
    survived: int = 0
    lost: int = 0
    recover: list[float] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0  # the whole row's trials

    def add(self, survived: bool, lost: bool, seconds: float | None = None, note: str = "") -> None:
        self.trials += 1
        self.survived += bool(survived)
        self.lost += bool(lost)
        if seconds is not None:
            self.recover.append(seconds)
        if note and (not survived or lost):
            self.notes.append(note)

    def cells(self) -> list[str]:
        if self.recover:
            time_cell = f"{statistics.median(self.recover):.1f} s (max {max(self.recover):.1f} s)"
        else:
            time_cell = "-"
        return [
            self.fault,
            str(self.trials),
            f"{self.survived}/{self.trials}",
            "nothing lost" if self.lost == 0 else f"{self.lost} trials",
            time_cell,
            f"{self.wall_s:.0f} s",
        ]


def print_table(rows: list[Row]) -> None:
    header = ["fault", "trials", "survived", "data lost", "time to recover (median)", "row took"]
    table = [header, *[r.cells() for r in rows]]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for k, line in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
        if k == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        for note in row.notes:
            print(f"  {row.fault}: {note}")


# -- helpers ------------------------------------------------------------------------------------------------


def flare(*args: str, runs_dir: Path, env: dict | None = None, timeout: float = 600):
    """``flare ARGS`` in a new process; returns (completed process, wall seconds)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flare_core.cli", *args, "--runs-dir", str(runs_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    return proc, time.perf_counter() - started


def cli(*args: str, runs_dir: Path, inprocess: bool = False):
    """``flare ARGS`` in this process (``inprocess``: faster, for checks that need no process of their own)
    or in a new one; returns (completed process, wall seconds)."""
    if not inprocess:
        return flare(*args, runs_dir=runs_dir)
    import io

    from flare_core.cli.parser import main as flare_main

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = flare_main([*args, "--runs-dir", str(runs_dir)])
    seconds = time.perf_counter() - started
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue()), seconds


def flare_popen(*args: str, runs_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "flare_core.cli", *args, "--runs-dir", str(runs_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def params_for(short: bool, seed: int = 0) -> RunParams:
    if short:  # embeddings (one cheap control), information sufficiency and the summary only: seconds per run
        return RunParams(
            models=MODELS[:2], estimators=["gmm"], controls=["shuffled-glove-6b-50d"], geometry=False,
            maps=False, downstream=False, validation=[], collapse=False, concentration=False, seed=seed,
        )  # fmt: skip
    return RunParams(models=MODELS, estimators=["gmm"], collapse=False, concentration=False, seed=seed)


def result_files(run: Run) -> dict[str, str]:
    """sha256 of every result file of a run (files with timings inside, and worker files, left out)."""
    found = {}
    for path in sorted(run.path.rglob("*")):
        rel = path.relative_to(run.path).as_posix()
        if not path.is_file() or path.name in VOLATILE or path.name.startswith(".tmp-"):
            continue
        if rel.startswith(VOLATILE_UNDER) or rel in VOLATILE_FILES:
            continue
        found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def mtimes(run: Run) -> dict[str, int]:
    return {
        p.relative_to(run.path).as_posix(): p.stat().st_mtime_ns
        for p in run.path.rglob("*")
        if p.is_file() and not p.name.startswith(".tmp-") and p.name not in VOLATILE
    }


def finished_unit(file: str, files: dict[str, int], done_stages: Collection[str] | None = None) -> bool:
    """Whether ``file`` belongs to finished work: a sufficiency unit is finished once its ``.json`` record
    is written (after its arrays), so the arrays of a unit cut short are rightly written again. The
    files a sufficiency stage assembles from its units (``sufficiency/<estimator>/`` outside ``pairs/``)
    are finished once the stage is recorded done (in ``done_stages``, when given): a stage cut short while
    writing them rightly writes them again from its stored units."""
    parts = file.split("/")
    if done_stages is not None and parts[0] == "sufficiency" and len(parts) > 2 and parts[2] != "pairs":
        return f"sufficiency_{parts[1]}" in done_stages
    if "/pairs/" not in file or file.endswith(".json"):
        return True
    return file.rsplit(".", 1)[0] + ".json" in files


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def wait_all(store: RunStore, ids: list[str], timeout: float = 900) -> dict[str, str]:
    return {run_id: jobs.wait(store, run_id, timeout=timeout, poll=0.1) for run_id in ids}


STAGE_ORDER = ("embeddings", "geometry", "maps", "downstream", "sufficiency", "collapse", "concentration",
               "validation", "summary")  # fmt: skip


def _stage_rank(stage: str) -> int:
    return next((k for k, prefix in enumerate(STAGE_ORDER) if stage.startswith(prefix)), len(STAGE_ORDER))


class Reference:
    """One uninterrupted run: its result files, its stage timings, and the files every pass rewrites. The run
    is computed the first time one of these is asked for: a fault that needs only the corpus and the
    parameters (a big input, a long text) never waits for it. ``build(store, corpus_path, params)``, when
    given, returns that run finished in ``store`` under the id ``reference`` instead of computing it here."""

    def __init__(
        self, work: Path, corpus_path: Path, params: RunParams, build: Callable[..., Run] | None = None
    ) -> None:
        self.corpus = load_corpus(corpus_path, text_column="text", label_column="label")
        self.corpus_path = corpus_path
        self.params = params
        self.work = work
        self.build = build

    @functools.cached_property
    def _built(self) -> dict:
        store = RunStore(self.work / "reference")
        started = time.perf_counter()
        if self.build is None:
            run = create_run(store, self.corpus, self.params, run_id="reference")
            assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
        else:  # the same run, finished elsewhere (the tests keep one for all their faults)
            run = self.build(store, self.corpus_path, self.params)
            assert run.id == "reference" and run.status == "done", run.manifest.get("traceback")
        seconds = time.perf_counter() - started
        files = result_files(run)
        timings = dict(run.manifest["timings"])
        from flare_core.run.stages import compute_stages

        before = mtimes(run)
        compute_stages(run)  # a pass over a complete run: what it writes again, it always writes
        after = mtimes(run)
        return {
            "run": run,
            "seconds": seconds,
            "files": files,
            "timings": timings,
            "stages": sorted(timings, key=_stage_rank),  # in the order they run
            "rewritten": {f for f in before if after.get(f) != before[f]},
        }

    @property
    def built(self) -> bool:
        """Whether the run has been computed (it is, once anything but the corpus or parameters is read)."""
        return "_built" in vars(self)

    run = property(lambda self: self._built["run"])
    seconds = property(lambda self: self._built["seconds"])
    files = property(lambda self: self._built["files"])
    timings = property(lambda self: self._built["timings"])
    stages = property(lambda self: self._built["stages"])
    rewritten = property(lambda self: self._built["rewritten"])

    def new_run(self, store: RunStore, run_id: str | None = None) -> Run:
        return create_run(store, self.corpus, self.params, run_id=run_id)

    def same(self, run: Run) -> list[str]:
        """Result files of ``run`` that differ from the reference (or are missing / extra)."""
        files = result_files(run)
        return sorted(f for f in set(files) | set(self.files) if files.get(f) != self.files.get(f))
