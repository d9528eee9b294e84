"""Fault injection: real runs, real processes, real signals and real files; one table of what survived.

Usage::

    python bench/faults.py                # the full form: 20 seeded kills over every stage, and the rest
    python bench/faults.py --short        # a few trials per fault (the test suite runs this, < 2 min)
    python bench/faults.py --only kill,queue --kills 5 --seed 3

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
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flare_core.data.corpus import load_corpus  # noqa: E402
from flare_core.run import jobs  # noqa: E402
from flare_core.run.create import create_run  # noqa: E402
from flare_core.run.outcomes import problem_sentences, problems  # noqa: E402
from flare_core.run.params import RunParams  # noqa: E402
from flare_core.store import doctor  # noqa: E402
from flare_core.store.runs import Run, RunStore, safe_name  # noqa: E402

MODELS = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]
# files that differ between two identical runs: timings inside them, the worker's own files, or locks
VOLATILE = ("manifest.json", "worker.log", "worker.heartbeat", "run.lock", ".run.lock.guard", "labels.lock")
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
    if short:  # embeddings, information sufficiency and the summary only: seconds per run
        return RunParams(
            models=MODELS[:2], estimators=["gmm"], geometry=False, maps=False, downstream=False,
            validation=[], collapse=False, concentration=False, seed=seed,
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
    """One uninterrupted run: its result files, its stage timings, and the files every pass rewrites."""

    def __init__(self, work: Path, corpus_path: Path, params: RunParams) -> None:
        self.corpus = load_corpus(corpus_path, text_column="text", label_column="label")
        self.params = params
        store = RunStore(work / "reference")
        self.run = create_run(store, self.corpus, params, run_id="reference")
        started = time.perf_counter()
        assert jobs.run_in_process(self.run) == "done", self.run.manifest.get("traceback")
        self.seconds = time.perf_counter() - started
        self.files = result_files(self.run)
        self.timings = dict(self.run.manifest["timings"])
        self.stages = sorted(self.timings, key=_stage_rank)  # in the order they run
        from flare_core.run.stages import compute_stages

        before = mtimes(self.run)
        compute_stages(self.run)  # a pass over a complete run: what it writes again, it always writes
        after = mtimes(self.run)
        self.rewritten = {f for f in before if after.get(f) != before[f]}

    def new_run(self, store: RunStore, run_id: str | None = None) -> Run:
        return create_run(store, self.corpus, self.params, run_id=run_id)

    def same(self, run: Run) -> list[str]:
        """Result files of ``run`` that differ from the reference (or are missing / extra)."""
        files = result_files(run)
        return sorted(f for f in set(files) | set(self.files) if files.get(f) != self.files.get(f))


# -- kills --------------------------------------------------------------------------------------------------


def kill_trials(ref: Reference, work: Path, n: int, seed: int) -> Row:
    row = Row("kill -9 of the worker + flare resume")
    rng = random.Random(seed)
    store = RunStore(work / "kills")
    stages = ref.stages
    for k in range(n):
        stage = stages[k % len(stages)]
        fraction = rng.random()
        run = ref.new_run(store)
        pid = jobs.start(store, run.id)
        before_stage = stages[: stages.index(stage)]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            manifest = run.manifest
            if manifest.get("status") in ("done", "failed") or (
                manifest.get("status") == "running"
                and all(s in manifest.get("timings", {}) for s in before_stage)
            ):
                break
            time.sleep(0.01)
        time.sleep(fraction * ref.timings[stage])
        kill_group(pid)
        killed_in = (run.manifest.get("progress") or {}).get("stage", "?")
        status_after_kill = run.status
        done_stages = set(run.manifest.get("timings", {}))
        before = mtimes(run)
        proc, seconds = flare("resume", run.id, "--json", runs_dir=store.root)
        ok = proc.returncode == 0 and json.loads(proc.stdout or "{}").get("status") == "done"
        differ = ref.same(run) if ok else ["(not finished)"]
        after = mtimes(run)
        redone = sorted(
            f
            for f in before
            if f not in ref.rewritten
            and f in after
            and after[f] != before[f]
            and finished_unit(f, before, done_stages)
        )
        finished_before = status_after_kill == "done"
        note = (
            f"trial {k} (target {stage}+{fraction:.2f}, killed in {killed_in}): rc {proc.returncode}, "
            f"differ {differ[:3]}, recomputed {redone[:3]} {proc.stderr[-300:]}"
        )
        row.add(ok and not differ, bool(differ or redone), seconds, note)
        if os.environ.get("FAULTS_VERBOSE"):
            print(
                f"kill {k}: at {stage} + {fraction:.0%} ({killed_in}"
                f"{', the run had finished' if finished_before else ''}), {len(before)} files kept, "
                f"resumed in {seconds:.1f} s, identical {not differ}, recomputed {redone}",
                file=sys.stderr,
            )
    return row


# -- corruption ---------------------------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(max(64, path.stat().st_size)))


def corruption_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("damaged file in a stored run")
    first_unit = sorted((ref.run.path / "sufficiency" / "gmm" / "pairs").rglob("s*_t*.json"))[0]
    unit = first_unit.relative_to(ref.run.path).as_posix()
    embedding = f"embeddings/{safe_name(ref.params.models[0])}.npy"
    cases = [
        ("manifest.json", _truncate, False),
        (embedding, _truncate, True),
        ("sufficiency/gmm/scores.parquet", _garbage, True),
        (unit, _garbage, True),
    ]
    if not short:
        cases += [
            ("corpus.parquet", _garbage, False),
            ("manifest.json", _garbage, False),
            ("corpus.parquet", _truncate, False),
            (embedding, _garbage, True),
            ("sufficiency/gmm/result/is_matrix.npy", _truncate, True),
            ("summary.parquet", _truncate, True),
        ]
    for k, (file, damage, recomputable) in enumerate(cases):
        store = RunStore(work / f"corrupt-{k}")
        shutil.copytree(ref.run.path, store.root / "victim")
        shutil.copytree(ref.run.path, store.root / "neighbour")
        for name in ("victim", "neighbour"):
            path = store.root / name / "manifest.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), "id": name}))
        victim = Run(store.root / "victim")
        damage(victim.path / file)
        check, _ = cli("doctor", "--json", runs_dir=store.root, inprocess=short)
        report = json.loads(check.stdout)
        named = [(f["run_id"], f["file"], f["recomputable"]) for f in report["findings"]]
        named_ok = named == [("victim", file, recomputable)] and check.returncode == 1
        proc, seconds = cli("resume", "victim", "--json", runs_dir=store.root, inprocess=short)
        if recomputable:
            resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
            differ = ref.same(victim) if resumed else ["(not resumed)"]
            survived = named_ok and resumed and not differ and doctor.check_run(victim.path) == []
        else:
            resumed = proc.returncode == 4 and f"{file} of run victim is damaged" in proc.stderr
            differ = []
            survived = named_ok and resumed and (victim.path / file).exists()
            seconds = None
        shown, _ = cli("show", "neighbour", runs_dir=store.root, inprocess=short)
        neighbour_ok = shown.returncode == 0 and Run(store.root / "neighbour").manifest["id"] == "neighbour"
        lost = bool(differ) or not neighbour_ok or doctor.check_run(store.root / "neighbour") != []
        row.add(
            survived and neighbour_ok,
            lost,
            seconds,
            f"{damage.__name__[1:]} {file}: doctor said {named}, resume rc {proc.returncode} "
            f"{proc.stderr[-200:]!r}, differ {differ[:3]}",
        )
    token_store_trials(row, ref, work, short)
    collapse_token_trial(row, ref, work)
    return row


@contextlib.contextmanager
def environment(**values: str):
    """``os.environ`` with ``values`` set, restored afterwards."""
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def token_store_trials(row: Row, ref: Reference, work: Path, short: bool) -> None:
    """Damaged token stores, the temporary token states a collapse stage keeps in the cache's scratch folder
    (a stopped process leaves them there): opening one must name exactly the damaged file, ``flare doctor``
    must report that file, ``flare doctor --repair`` must remove that store, and a sound store beside it must
    stay as it was. A collapse stage that meets such a store fails naming the file and ``flare resume``."""
    import numpy as np

    from flare_core.encoders import random_init_transformer, token_store, write_token_states

    config = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128}  # fmt: skip
    sound = write_token_states(random_init_transformer(config, seed=0, device="cpu"), ref.corpus.texts[:8],
                               work / "token-store")  # fmt: skip
    tokens, offsets, meta = token_store.TOKENS_FILE, token_store.OFFSETS_FILE, token_store.META_FILE
    cases = [(tokens, _truncate), (offsets, _garbage)]
    if not short:
        cases += [(tokens, _garbage), (offsets, _truncate), (meta, _truncate), (meta, _garbage)]
    for k, (name, damage) in enumerate(cases):
        cache = (work / f"token-cache-{k}").resolve()
        victim, neighbour = (
            cache / "scratch" / "tokens-victim" / "store",
            cache / "scratch" / "tokens-neighbour" / "store",
        )
        shutil.copytree(sound.directory, victim)
        shutil.copytree(sound.directory, neighbour)
        damage(victim / name)
        try:
            token_store.TokenStates.open(victim)
            opened = "opened without complaint"
        except token_store.DamagedTokenStore as exc:
            opened = exc.path
        with environment(FLARE_CACHE_DIR=str(cache)):
            check, _ = cli("doctor", "--json", runs_dir=work / f"token-runs-{k}", inprocess=short)
            named = [f["file"] for f in json.loads(check.stdout)["scratch"]]
            repair, seconds = cli("doctor", "--repair", runs_dir=work / f"token-runs-{k}", inprocess=short)
        kept = token_store.TokenStates.open(neighbour)
        same = np.array_equal(kept.rows, sound.rows) and np.array_equal(kept.offsets, sound.offsets)
        row.add(
            opened == victim / name
            and named == [str(victim / name)]
            and check.returncode == 1
            and repair.returncode == 0
            and not victim.exists(),
            not same,
            seconds,
            f"{damage.__name__[1:]} token store {name}: open named {opened}, doctor said {named} "
            f"(rc {check.returncode}), repair rc {repair.returncode} {repair.stdout[-200:]!r}, neighbour same {same}",
        )


def collapse_token_trial(row: Row, ref: Reference, work: Path) -> None:
    """A token store damaged on disk while a real collapse stage runs (all-MiniLM-L6-v2 on 12 texts): the
    collapse stage (or the run) must fail naming the damaged file and ``flare resume``; ``flare resume`` must then finish it with the
    collapse results of an uninterrupted run and without embedding again."""
    from unittest import mock

    from flare_core import encoders
    from flare_core.encoders import token_store

    params = RunParams(
        models=["all-MiniLM-L6-v2"], estimators=[], controls=[], geometry=False, maps=False, downstream=False,
        validation=[], collapse=True, collapse_texts=12, concentration=False,
    )  # fmt: skip
    store = RunStore(work / "token-collapse")
    reference = create_run(store, ref.corpus, params)
    assert jobs.run_in_process(reference) == "done", reference.manifest.get("traceback")
    victim = create_run(store, ref.corpus, params)
    write = encoders.write_token_states
    damaged: list[Path] = []

    def write_then_damage(*args, **kwargs):
        states = write(*args, **kwargs)
        damaged.append(states.directory / token_store.TOKENS_FILE)
        _truncate(damaged[-1])
        return token_store.TokenStates.open(states.directory)  # what the stage does when it reads them back

    with mock.patch.object(encoders, "write_token_states", write_then_damage):
        status = jobs.run_in_process(victim)
    # The collapse stage fails alone (the run ends "done, with problems") or, before stage isolation, the run.
    error = victim.manifest.get("error") or " ".join(problem_sentences(victim.manifest))
    said = bool(damaged) and damaged[0].name in error and f"flare resume {victim.id}" in error
    stopped = status == "failed" or bool(problems(victim.manifest))
    embedded = mtimes(victim)
    proc, seconds = cli("resume", victim.id, "--json", runs_dir=store.root, inprocess=True)
    resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
    files, expected = result_files(victim), result_files(reference)
    differ = sorted(
        f for f in set(files) | set(expected) if f.startswith("collapse/") and files.get(f) != expected.get(f)
    )
    again = [f for f in embedded if f.startswith("embeddings/") and mtimes(victim).get(f) != embedded[f]]
    row.add(
        stopped and said and resumed and not differ and not again,
        bool(differ),
        seconds,
        f"token store damaged during collapse: status {status}, error {error[:200]!r}, resume rc {proc.returncode}, "
        f"collapse files differ {differ[:3]}, embedded again {again}",
    )


# -- queue --------------------------------------------------------------------------------------------------


def queue_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("4 runs, FLARE_MAX_JOBS=2 (+ restart)")
    old = os.environ.get("FLARE_MAX_JOBS")
    os.environ["FLARE_MAX_JOBS"] = "2"
    try:
        for trial in range(1 if short else 2):
            store = RunStore(work / f"queue-{trial}")
            runs = [ref.new_run(store) for _ in range(4)]
            started = time.perf_counter()
            submitted = [jobs.submit(store, r.id) for r in runs]
            positions = [s["position"] for s in submitted]
            most = 0
            restarted = None
            while True:
                active = jobs.active_runs(store)
                most = max(most, len(active))
                if trial == 1 and restarted is None and jobs.waiting_runs(store) and active:
                    for run_id in active:  # the machine stops: every worker dies, nobody dispatches
                        kill_group(store.get(run_id).manifest["pid"])
                    restart, _ = flare("runs", runs_dir=store.root)  # the app comes back
                    restarted = restart.returncode
                    for run_id in active:  # and the killed runs are resumed through the queue
                        flare("resume", run_id, "--background", runs_dir=store.root)
                statuses = [jobs.effective_status(r) for r in runs]
                if all(s in ("done", "failed", "cancelled") for s in statuses):
                    break
                time.sleep(0.05)
            seconds = time.perf_counter() - started
            launched = [r.manifest.get("launched_ns", 0) for r in runs]
            differ = [f for r in runs for f in ref.same(r)]
            ok = (
                positions == [None, None, 1, 2]
                and all(s == "done" for s in statuses)
                and most <= 2
                and (trial == 1 or launched == sorted(launched))
                and not differ
                and (trial == 0 or restarted == 0)
            )
            row.add(
                ok,
                bool(differ),
                seconds if trial == 1 else None,
                f"trial {trial}: positions {positions}, statuses {statuses}, at most {most} at once, "
                f"launch order ok {launched == sorted(launched)}, differ {differ[:3]}",
            )
    finally:
        if old is None:
            os.environ.pop("FLARE_MAX_JOBS", None)
        else:
            os.environ["FLARE_MAX_JOBS"] = old
    return row


# -- load: a browser reloading the pages while queued runs compute -------------------------------------------

LOAD_PAGES = ["", "sufficiency", "corpus", "collapse", "layers", "validation", "runs"]


def load_trials(ref: Reference, work: Path, seconds_between: float = 2.0) -> Row:
    """4 runs with ``FLARE_MAX_JOBS=2`` started from the dashboard's process while Chromium reloads each
    analysis page of a finished run every ``seconds_between`` seconds; p95 of the page render times."""
    row = Row("4 runs + a browser reloading pages every 2 s")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        row.notes.append("Chromium is not installed: skipped (bash install.sh --with-browser)")
        return row
    import socket
    import urllib.request

    from playwright.sync_api import sync_playwright

    store = RunStore(work / "load")
    shutil.copytree(ref.run.path, store.root / ref.run.id)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "FLARE_RUNS_DIR": str(store.root), "FLARE_MAX_JOBS": "2"}
    from flare_core.cli.commands import app_command

    app = subprocess.Popen(  # served as `flare app` serves it (no file watcher outside development)
        [*app_command(root / "app.py", port=port, headless=True),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    times: list[float] = []
    pages: list[str] = []
    old = os.environ.get("FLARE_MAX_JOBS")
    os.environ["FLARE_MAX_JOBS"] = "2"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                break
            time.sleep(0.5)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--headless=new", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            for path in LOAD_PAGES:  # warm-up, not timed: the app's first imports and caches
                page.goto(f"{url}/{path}?run={ref.run.id}", wait_until="domcontentloaded", timeout=120_000)
                page.locator("h1").first.wait_for(timeout=120_000)
                page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=120_000)
            runs = [ref.new_run(store) for _ in range(4)]
            for run in runs:
                jobs.submit(store, run.id)
            k = 0
            while True:
                path = LOAD_PAGES[k % len(LOAD_PAGES)]
                k += 1
                started = time.perf_counter()
                page.goto(f"{url}/{path}?run={ref.run.id}", wait_until="domcontentloaded", timeout=60_000)
                page.locator("h1").first.wait_for(timeout=60_000)
                page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=60_000)
                times.append(time.perf_counter() - started)
                pages.append(path or "overview")
                if page.locator("[data-testid='stException']").count():
                    row.notes.append(f"exception on /{path}")
                if all(jobs.effective_status(r) in ("done", "failed", "cancelled") for r in runs):
                    break
                time.sleep(max(0.0, seconds_between - (time.perf_counter() - started)))
            browser.close()
        statuses = [jobs.effective_status(r) for r in runs]
        differ = [f for r in runs for f in ref.same(r)]
        p95 = float(sorted(times)[max(0, int(round(0.95 * len(times))) - 1)])
        row.add(
            all(s == "done" for s in statuses) and not differ and p95 < 2.0,
            bool(differ),
            None,
            f"statuses {statuses}, differ {differ[:3]}, p95 {p95:.2f} s",
        )
        row.notes.append(
            f"{len(times)} page loads while 4 runs computed: median {statistics.median(times):.2f} s, "
            f"p95 {p95:.2f} s, max {max(times):.2f} s; slowest: "
            + ", ".join(
                f"/{pages[k]} {times[k]:.2f} s" for k in sorted(range(len(times)), key=times.__getitem__)[-4:]
            )
        )
    finally:
        if old is None:
            os.environ.pop("FLARE_MAX_JOBS", None)
        else:
            os.environ["FLARE_MAX_JOBS"] = old
        app.terminate()
        app.wait(timeout=30)
    return row


# -- concurrent edits ---------------------------------------------------------------------------------------


def concurrent_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("concurrent resume / delete / export / import")
    repeats = 1 if short else 3
    for trial in range(repeats):
        store = RunStore(work / f"concurrent-{trial}")
        # two `flare resume` of one run at the same moment
        run = ref.new_run(store)
        a = flare_popen("resume", run.id, "--json", runs_dir=store.root)
        b = flare_popen("resume", run.id, "--json", runs_dir=store.root)
        started = time.perf_counter()
        outs = [(p.wait(600), *p.communicate()) for p in (a, b)]
        seconds = time.perf_counter() - started
        codes = sorted(o[0] for o in outs)
        told = any(o[0] == 3 and f"run {run.id} is busy: process" in o[2] for o in outs)
        late = any(o[0] == 0 and "already done" in o[2] for o in outs)  # the loser started after
        differ = ref.same(run)
        row.add(
            run.status == "done" and not differ and (codes == [0, 3] and told or codes == [0, 0] and late),
            bool(differ),
            seconds,
            f"two resumes: exit codes {codes}, {[o[2][-160:] for o in outs]}",
        )
        # delete of a running run is refused; it finishes
        running = ref.new_run(store)
        jobs.start(store, running.id)
        while running.status == "queued" and jobs.effective_status(running) != "failed":
            time.sleep(0.02)
        refused, _ = flare("delete", running.id, runs_dir=store.root)
        final = jobs.wait(store, running.id, timeout=600, poll=0.1)
        ok = (refused.returncode == 3 and "is busy" in refused.stderr) or (
            refused.returncode == 0 and not store.exists(running.id)  # it had finished already
        )
        row.add(ok and (final == "done" or not store.exists(running.id)), False, None,
                f"delete while running: rc {refused.returncode} {refused.stderr[-200:]!r}, final {final}")  # fmt: skip
        # export and delete at the same moment
        out = work / f"bundle-{trial}.zip"
        exp = flare_popen("export", running.id, "-o", str(out), runs_dir=store.root)
        dele = flare_popen("delete", running.id, runs_dir=store.root)
        exp_rc, dele_rc = exp.wait(600), dele.wait(600)
        exp_err = exp.communicate()[1]
        if exp_rc == 0:  # the export won: its bundle is complete
            imported, _ = flare("import", str(out), "--run-id", "reimported", runs_dir=store.root)
            differ = ref.same(store.get("reimported")) if imported.returncode == 0 else ["(import failed)"]
            complete = not differ
        else:  # the delete won: the export says so and leaves no file
            said = "deleted while it was being exported" in exp_err or f"no run '{running.id}'" in exp_err
            complete, differ = said and not out.exists(), []
        leftovers = [p.name for p in store.root.iterdir() if p.name.startswith((".deleting-", ".staging-"))]
        row.add(
            dele_rc == 0 and complete and not leftovers and not store.exists(running.id),
            not complete,
            None,
            f"export+delete: export rc {exp_rc} {exp_err[-200:]!r}, delete rc {dele_rc}, leftovers {leftovers}, "
            f"bundle differs in {differ[:3]}",
        )
        # the same bundle imported twice at the same moment
        if not out.exists():
            from flare_core.store.bundle import export_run

            export_run(run, out)
        target = RunStore(work / f"import-{trial}")
        procs = [flare_popen("import", str(out), runs_dir=target.root) for _ in range(2)]
        results = [(p.wait(600), *p.communicate()) for p in procs]
        codes = sorted(r[0] for r in results)
        imported = [r for r in target]
        leftovers = [p.name for p in target.root.glob(".staging-*")]
        ok = (
            codes == [0, 2]
            and any("already exists" in r[2] for r in results)
            and len(imported) == 1
            and not leftovers
            and doctor.check_run(imported[0].path) == []
        )
        row.add(
            ok, not ok and len(imported) != 1, None, f"import twice: {codes} {[r[2][-160:] for r in results]}"
        )
    return row


# -- full disk ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def small_filesystem(path: Path, size_mib: int = 16):
    """A size-limited tmpfs mounted at ``path`` (needs root); yields False when it cannot be made."""
    path.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)], capture_output=True
    )
    try:
        yield made.returncode == 0
    finally:
        if made.returncode == 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its file system is full; return it (delete it to free space)."""
    filler = folder / "filler.bin"
    block = b"\xff" * (1 << 16)
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(block)
                fh.flush()
        except OSError:
            pass
    return filler


def disk_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("disk full during embeddings / IS")
    with small_filesystem(work / "small-disk") as mounted:
        if not mounted:
            row.notes.append("no tmpfs could be mounted here (not root): skipped; tests/run/test_faults.py "
                             "simulates ENOSPC in the store's writes instead")  # fmt: skip
            return row
        stages = ["embeddings", "sufficiency_gmm"] * (1 if short else 2)
        for k, stage in enumerate(stages):
            store = RunStore(work / "small-disk" / f"store-{k}")
            run = ref.new_run(store)
            pid = jobs.start(store, run.id)
            filler = None
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and filler is None:
                progress = run.manifest.get("progress") or {}
                if progress.get("stage") == stage or run.status in ("done", "failed"):
                    filler = fill(store.root)
                time.sleep(0.005)
            final = jobs.wait(store, run.id, timeout=300, poll=0.05)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            error = run.manifest.get("error") or ""
            words = error.startswith(f"the disk is full: free space and run `flare resume {run.id}`")
            half = [f.message for f in doctor.check_run(run.path) if f.kind == "damaged"]
            half += [str(p) for p in run.path.rglob(".tmp-*")]
            filler.unlink()
            proc, seconds = flare("resume", run.id, "--json", runs_dir=store.root)
            resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
            differ = ref.same(run) if resumed else ["(not resumed)"]
            row.add(
                final == "failed" and words and not half and resumed and not differ,
                bool(differ or half),
                seconds,
                f"full during {stage}: status {final}, error {error[:160]!r}, half-written {half[:3]}, "
                f"resume rc {proc.returncode} {proc.stderr[-200:]!r}, differ {differ[:3]}",
            )
    return row


# -- big inputs ---------------------------------------------------------------------------------------------

# peak memory of the child itself: VmHWM belongs to the process's address space, which exec replaces
# (ru_maxrss would keep the peak of the process that started it, such as a 1 GB pytest)
_PEAK = (
    "import sys, json\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) / 1024\n"
    "from flare_core.data.corpus import load_corpus\n"
    "out = {'base_mib': peak()}\n"
    "try:\n"
    "    c = load_corpus(sys.argv[1], text_column='text', label_column=None, max_rows=int(sys.argv[2]) or None)\n"
    "    out['rows'] = len(c)\n"
    "    out['max_chars'] = int(max(len(t) for t in c.texts))\n"
    "except Exception as exc:\n"
    "    out['error'] = f'{type(exc).__name__}: {exc}'\n"
    "out['peak_mib'] = peak()\n"
    "print(json.dumps(out))\n"
)


def _load_in_child(path: Path, max_rows: int = 0) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path), str(max_rows)], capture_output=True, text=True
    )
    return (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.stdout.strip()
        else {"error": proc.stderr[-300:]}
    )


def big_input_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("big inputs")
    # a 2 GB sparse CSV: refused at the size limit before anything is read
    sparse = work / "huge.csv"
    with open(sparse, "wb") as fh:
        fh.write(b"text\n")
        fh.truncate(2 * 1024**3)
    started = time.perf_counter()
    out = _load_in_child(sparse)
    seconds = time.perf_counter() - started
    refused = "larger than the limit" in out.get("error", "") and out["peak_mib"] - out["base_mib"] < 64
    row.add(refused, False, None, f"2 GB file: {out}")
    row.notes.append(
        f"2 GB sparse CSV refused in {seconds:.1f} s; peak RSS {out['peak_mib']:.0f} MiB "
        f"({out['peak_mib'] - out['base_mib']:.0f} MiB above the {out['base_mib']:.0f} MiB after imports)"
    )
    sparse.unlink()
    # a file of many rows sampled to 20,000
    n = 100_000 if short else 1_000_000
    many = work / "many.csv"
    with open(many, "w", encoding="utf-8") as fh:
        fh.write("text\n")
        for i in range(n):
            fh.write(f"row {i} of a large corpus with a few words in it\n")
    out = _load_in_child(many, 20_000)
    row.add(out.get("rows") == 20_000, False, None, f"{n:,} rows: {out}")
    row.notes.append(
        f"{n:,}-row CSV ({many.stat().st_size / 2**20:.0f} MiB) sampled to {out.get('rows')} rows; peak RSS "
        f"{out['peak_mib']:.0f} MiB ({out['peak_mib'] - out['base_mib']:.0f} MiB above the imports)"
    )
    many.unlink()
    return row


# -- a 10 MB text -------------------------------------------------------------------------------------------


def long_text_trials(ref: Reference, work: Path, short: bool) -> Row:
    """The reference corpus with its first text replaced by a 10 MB one: the run must finish, the text be
    cut to ``MAX_TEXT_CHARS`` with the cut counted in the manifest, and every other text stay as it was.
    The full form also starts it with ``flare run``, which must say so in words."""
    import pandas as pd

    from flare_core.data.corpus import MAX_TEXT_CHARS

    row = Row("a 10 MB text in the corpus")
    frame = pd.read_csv(work / "corpus.csv")
    huge = ("word " * (2 * 1024**2))[: 10 * 1024**2]
    frame.loc[0, "text"] = huge
    frame.to_csv(work / "long.csv", index=False)
    store = RunStore(work / "long")
    started = time.perf_counter()
    corpus = load_corpus(work / "long.csv", text_column="text", label_column="label")
    run = create_run(store, corpus, ref.params)
    status = jobs.run_in_process(run)
    seconds = time.perf_counter() - started
    stored = run.corpus_frame()["text"].tolist()
    stats = run.manifest["corpus"]["stats"]
    kept_whole = stored[1:] == ref.corpus.texts[1:]
    cut = (
        stored[0] == huge[:MAX_TEXT_CHARS] and stats.get("n_truncated") == 1 and stats.get("truncation_note")
    )
    row.add(
        status == "done" and bool(cut) and kept_whole,
        not kept_whole,
        None,
        f"status {status}, stored length {len(stored[0]):,}, stats {stats.get('n_truncated')} "
        f"{stats.get('truncation_note')!r}, other texts unchanged {kept_whole}",
    )
    row.notes.append(
        f"run with a 10 MB text finished in {seconds:.1f} s ({status}); the text was stored with "
        f"{len(stored[0]):,} characters; the manifest says: {stats.get('truncation_note')}"
    )
    if short:
        return row
    proc, seconds = flare(
        "run", str(work / "long.csv"), "--models", MODELS[0] + "," + MODELS[1], "--estimator", "gmm",
        "--no-collapse", "--controls", "none", "--json", runs_dir=store.root,
    )  # fmt: skip
    done = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
    said = f"note: 1 of {len(frame)} texts longer than {MAX_TEXT_CHARS:,} characters was cut" in proc.stderr
    row.add(done and said, False, None, f"flare run: rc {proc.returncode} {proc.stderr[-300:]!r}")
    row.notes.append(f"`flare run` of the same file finished in {seconds:.1f} s and said it: {said}")
    return row


# -- main ---------------------------------------------------------------------------------------------------

FAULTS = ("kill", "corrupt", "disk", "queue", "load", "concurrent", "big", "long")


def run_faults(
    work: Path, *, short: bool, kills: int, seed: int, only: tuple[str, ...] = FAULTS
) -> tuple[list[Row], Reference]:
    from flare_core.data.demo import bbc_news_frame

    work.mkdir(parents=True, exist_ok=True)
    corpus_path = work / "corpus.csv"
    n_per_topic = 6 if short else 10
    bbc_news_frame(n_per_topic=n_per_topic, seed=0)[["text", "label"]].to_csv(corpus_path, index=False)
    ref = Reference(work, corpus_path, params_for(short))
    trials = {
        "kill": lambda: kill_trials(ref, work, kills, seed),
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
    print(f"reference run: {ref.seconds:.1f} s, stages {ref.timings}")
    print(f"files every pass rewrites (not counted as recomputed): {sorted(ref.rewritten)}")
    print_table(rows)
    print(f"total {time.perf_counter() - started:.0f} s")
    sys.exit(0 if all(r.survived == r.trials and r.lost == 0 for r in rows) else 1)


if __name__ == "__main__":
    main()
