"""Background runs: a separate process that survives its starter, can be cancelled, and records crashes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flare_core.data.corpus import load_corpus
from flare_core.errors import RunBusy
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store import atomic, locks
from flare_core.store.runs import Run, RunStore
from flare_core.view.results import run_results
from tests.support import STATIC, check_run_files, fast_params, flare, flare_here


@pytest.mark.slow
def test_background_run_can_be_cancelled_mid_way(tmp_path, small_corpus_path):
    store = RunStore(tmp_path / "runs")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = RunParams(
        models=["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"],
        estimators=["flow"],
        flow_preset="default",
        controls=[],
    )
    run = create_run(store, corpus, params)
    pid = jobs.start(store, run.id)
    assert pid > 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        progress = run.manifest.get("progress") or {}
        if progress.get("stage") == "sufficiency_flow":
            break
        assert jobs.effective_status(run) in ("queued", "running"), run.manifest.get("traceback")
        time.sleep(0.2)
    else:
        pytest.fail("the run never reached the flow stage")
    jobs.cancel(store, run.id)
    assert jobs.wait(store, run.id, timeout=300) == "cancelled"
    # the work finished before the cancellation is kept
    assert set(run.embedded_models()) == set(params.models)


def test_a_crash_marks_the_run_failed_with_the_error(tmp_path, small_corpus_path):
    store = RunStore(tmp_path / "runs")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(
        store, corpus, RunParams(models=["no-such-org/no-such-model"], estimators=["gmm"], controls=[])
    )
    assert jobs.run_in_process(run) == "failed"
    manifest = run.manifest
    assert "no model could be embedded" in manifest["error"]
    assert manifest["models"][0]["status"] == "failed"
    # the tests run with HF_HUB_OFFLINE=1 (conftest): an unknown hub id cannot be fetched
    assert manifest["models"][0]["error"].startswith(
        "ModelUnavailable: model 'no-such-org/no-such-model' is not available offline: "
        "the Hugging Face hub cannot be reached from this machine"
    )


def test_a_dead_worker_reads_as_failed(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "x", "params": {"models": ["m"]}})
    run.update(status="running")
    (run.path / jobs.HEARTBEAT).write_text(repr(time.time() - 3600))
    assert jobs.effective_status(run) == "failed"
    (run.path / jobs.HEARTBEAT).write_text(repr(time.time()))
    assert jobs.effective_status(run) == "running"


def _live_worker(store, name: str) -> tuple[object, subprocess.Popen]:
    """A run that reads as executing: a real live process as its worker, a fresh heartbeat."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    run = store.create({"name": name})
    run.update(status="running", pid=proc.pid, host=socket.gethostname())
    (run.path / jobs.HEARTBEAT).write_text(repr(time.time()))
    return run, proc


def test_runs_beyond_the_limit_wait_in_order_and_start_after_a_restart(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FLARE_MAX_JOBS", "1")
    busy, proc = _live_worker(store, "busy")
    store.create({"name": "created, never submitted"})  # neither counts nor waits
    first, second = store.create({"name": "first"}), store.create({"name": "second"})
    try:
        assert jobs.active_runs(store) == [busy.id]
        one, two = jobs.submit(store, first.id), jobs.submit(store, second.id)
        assert (one["status"], one["position"], two["position"]) == ("waiting", 1, 2)
        assert "is queued, position 2" in two["message"] and "limit 1" in two["message"]
        assert jobs.effective_status(second) == "queued" and not second.has("worker.log")
        assert jobs.waiting_runs(store) == [first.id, second.id]
        assert jobs.dispatch(store) == []  # still no free slot
    finally:
        proc.kill()
        proc.wait()
    # the worker died and nothing else runs: the next `flare` command (a fresh process) fills the slot
    assert jobs.effective_status(busy) == "failed"
    flare("runs", runs_dir=store.root)
    assert jobs.waiting_runs(store) == [second.id]
    assert first.manifest["pid"] and first.has("worker.log")
    # neither run has parameters, so each worker fails at once and starts the next run as it exits
    assert jobs.wait(store, first.id, timeout=120, poll=0.1) == "failed"
    assert jobs.wait(store, second.id, timeout=120, poll=0.1) == "failed"
    assert first.manifest["launched_ns"] < second.manifest["launched_ns"]
    assert "KeyError" in second.manifest["error"]
    assert jobs.waiting_runs(store) == [] and jobs.active_runs(store) == []


def test_a_waiting_run_can_be_cancelled_and_deleted(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FLARE_MAX_JOBS", "1")
    _, proc = _live_worker(store, "busy")
    try:
        a, b = store.create({"name": "a"}), store.create({"name": "b"})
        jobs.submit(store, a.id)
        jobs.submit(store, b.id)
        jobs.cancel(store, a.id)
        assert a.status == "cancelled" and jobs.waiting_runs(store) == [b.id]
        store.delete(b.id)
        assert jobs.waiting_runs(store) == [] and not store.exists(b.id)
    finally:
        proc.kill()
        proc.wait()


def test_the_run_lock_names_its_owner_and_a_dead_owner_is_replaced(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "x"})
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from flare_core.store import locks; "
            "locks.acquire(Path(sys.argv[1]), 'computing it'); print('held', flush=True); time.sleep(120)",
            str(run.path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert locks.live_owner(run.path)["pid"] == holder.pid
        with pytest.raises(RunBusy, match=rf"run {run.id} is busy: process {holder.pid} .* computing it"):
            locks.acquire(run.path, "resuming it")
        with pytest.raises(RunBusy, match="flare cancel"):
            store.delete(run.id)
        proc = flare("resume", run.id, runs_dir=store.root, check=False)
        assert proc.returncode == 3 and f"is busy: process {holder.pid}" in proc.stderr, proc.stderr
    finally:
        holder.kill()
        holder.wait()
    # the owner died without releasing: its lock file stays, names a dead pid, and is taken over
    assert locks.read_owner(run.path)["pid"] == holder.pid and locks.live_owner(run.path) is None
    with locks.holding(run.path, "checking it") as owner:
        assert owner["pid"] == os.getpid() == locks.read_owner(run.path)["pid"]
    assert not run.has(locks.RUN_LOCK)
    store.delete(run.id)
    assert not store.exists(run.id)


def test_two_resumes_of_one_run_one_wins_the_other_is_told(tmp_path, small_corpus_path):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    store = RunStore(tmp_path / "runs")
    run = create_run(store, corpus, fast_params(STATIC))
    with locks.holding(run.path, "computing it"):  # the first resume, in this process
        proc = flare("resume", run.id, "--json", runs_dir=store.root, check=False)
        assert proc.returncode == 3, proc.stderr
        assert f"run {run.id} is busy: process {os.getpid()}" in proc.stderr
        assert "flare cancel" in proc.stderr and proc.stdout == ""
        assert run.status == "queued" and not run.has("embeddings")  # the loser touched nothing
    proc = flare_here("resume", run.id, "--json", runs_dir=store.root)  # the winner: no process of its own
    assert json.loads(proc.stdout)["status"] == "done"
    check_run_files(run.path)


@pytest.mark.slow
def test_four_runs_with_two_slots_all_finish_with_the_numbers_of_a_run_alone(
    tmp_path, small_corpus_path, monkeypatch
):
    monkeypatch.setenv("FLARE_MAX_JOBS", "2")
    store = RunStore(tmp_path / "runs")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column=None)
    started, paused = [], []
    held = threading.Event()

    def beat() -> None:  # a stopped worker cannot beat: its heartbeat is kept fresh while it is held, so a
        while not held.wait(1.0):  # slow submission on a loaded machine does not make it read as dead
            for run_id in [s["run_id"] for s in started[:2]]:
                if store.get(run_id).manifest.get("pid") in paused:
                    atomic.write_text(store.root / run_id / jobs.HEARTBEAT, repr(time.time()))

    beating = threading.Thread(target=beat, daemon=True)
    beating.start()
    for _ in range(4):  # the embeddings and the information sufficiency only: the stages the queue runs
        run = create_run(store, corpus, fast_params(STATIC))
        proc = flare_here(  # the command in this process: it only submits, each run's worker is a process
            "resume", run.id, "--background", "--json", runs_dir=store.root
        )
        started.append(json.loads(proc.stdout))
        pid = store.get(started[-1]["run_id"]).manifest.get("pid")
        if pid:  # a worker started: held until every run is submitted, so none can finish before
            os.killpg(pid, signal.SIGSTOP)
            paused.append(pid)
    # a new run submitted by `flare run --background` waits behind them (it is then taken out of the queue)
    proc = flare_here(
        "run", str(small_corpus_path), "--models", ",".join(STATIC), "--estimator", "gmm", "--controls",
        "none", "--no-collapse", "--no-labels", "--background", "--json", runs_dir=store.root,
    )  # fmt: skip
    fifth = json.loads(proc.stdout)
    assert (fifth["status"], fifth["queue_position"]) == ("queued", 3)
    assert store.get(fifth["run_id"]).manifest.get("pid") is None
    jobs.cancel(store, fifth["run_id"])
    assert store.get(fifth["run_id"]).status == "cancelled"
    held.set()
    beating.join()
    for pid in paused:
        os.killpg(pid, signal.SIGCONT)
    assert len(paused) == 2
    assert [s["queue_position"] for s in started[2:]] == [1, 2]
    assert all(s["status"] == "queued" for s in started)
    runs = [store.get(s["run_id"]) for s in started]
    for run in runs:
        assert jobs.wait(store, run.id, timeout=600, poll=0.2) == "done", run.manifest.get("traceback")
    launched = [run.manifest["launched_ns"] for run in runs]
    assert launched == sorted(launched)  # started in the order they were submitted
    alone = run_results(runs[0])["sufficiency"]["gmm"]["scores"]
    assert {r["model"] for r in alone} == set(STATIC)
    for run in runs[1:]:
        assert run_results(run)["sufficiency"]["gmm"]["scores"] == alone
        check_run_files(run.path)
    assert jobs.active_runs(store) == [] and jobs.waiting_runs(store) == []


@pytest.mark.parametrize(("value", "step"), [(None, 10), ("7", 7), ("0", 0)])
def test_a_worker_lowers_its_cpu_priority_by_flare_worker_nice(value, step):
    env = {k: v for k, v in os.environ.items() if k != "FLARE_WORKER_NICE"}
    if value is not None:
        env["FLARE_WORKER_NICE"] = value
    code = (
        "import os; from flare_core.run import jobs; base = os.nice(0); print(jobs.lower_priority() - base)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert int(proc.stdout) == min(step, 19 - os.nice(0))


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no scheduler autogroups here")
def test_a_worker_in_its_own_session_makes_its_session_group_nice_too():
    # with autogroups, nice only weighs within a session: the worker's session must yield to the dashboard
    code = (
        "from flare_core.run import jobs; jobs.lower_priority(); print(open('/proc/self/autogroup').read())"
    )
    env = {k: v for k, v in os.environ.items() if k != "FLARE_WORKER_NICE"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        start_new_session=True,
    )
    assert proc.stdout.split()[-1] == "10", proc.stdout


@pytest.mark.parametrize("value", ["20", "-1", "high"])
def test_a_bad_flare_worker_nice_is_refused_in_words(monkeypatch, value):
    monkeypatch.setenv("FLARE_WORKER_NICE", value)
    with pytest.raises(
        ValueError, match=f"FLARE_WORKER_NICE must be a whole number from 0 to 19, got '{value}'"
    ):
        jobs.worker_niceness()


def test_a_launched_worker_has_its_heartbeat_before_its_pid_is_known(tmp_path, monkeypatch):
    """A reader that finds the pid of a worker still starting must find it alive, not failed."""
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "no parameters"})
    beating_when_pid_written = []
    update = Run.update

    def watching(self, **fields):
        if fields.get("pid") and fields["pid"] != os.getpid():
            beat = self.artefact(jobs.HEARTBEAT)
            fresh = beat.exists() and time.time() - float(beat.read_text()) < jobs.STALE_AFTER_SECONDS
            beating_when_pid_written.append(fresh)
        return update(self, **fields)

    monkeypatch.setattr(Run, "update", watching)
    jobs.start(store, run.id)
    assert beating_when_pid_written[:1] == [True]
    assert jobs.wait(store, run.id, timeout=120, poll=0.1) == "failed"  # no parameters: it fails at once
    assert "KeyError" in run.manifest["error"]


def test_a_launched_worker_does_not_inherit_the_owner_token(tmp_path, monkeypatch):
    """The dashboard's server holds the owner token in its environment; the worker it starts for a run has
    every other variable of it, not the token (read from the kernel's copy of the worker's environment)."""
    monkeypatch.setenv("FLARE_OWNER_TOKEN", "owner-token-of-the-dashboard")
    monkeypatch.setenv("FLARE_TEST_MARKER", "inherited")
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "no parameters"})
    jobs.start(store, run.id)
    pid = run.manifest["pid"]
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")  # alive: it imports torch first
    assert b"FLARE_TEST_MARKER=inherited" in environ
    assert not [v for v in environ if v.startswith(b"FLARE_OWNER_TOKEN=")]
    assert jobs.wait(store, run.id, timeout=120, poll=0.1) == "failed"  # no parameters: it fails at once


def test_a_finished_worker_is_reaped_by_the_process_that_started_it(tmp_path):
    """The dashboard starts the workers of its runs: one that has finished leaves no ``<defunct>`` entry
    under the dashboard (its exit status is collected at once, not at the next start of a process)."""
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "no parameters"})
    jobs.start(store, run.id)
    pid = run.manifest["pid"]
    assert jobs.wait(store, run.id, timeout=120, poll=0.1) == "failed"  # no parameters: it fails at once
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists():
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert time.monotonic() < deadline, (
            f"worker {pid} is still listed (state {state}) 30 s after its run ended"
        )
        time.sleep(0.1)
