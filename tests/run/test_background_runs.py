"""The demo gives way to a person's own runs (issue 52): submitted in the background it starts only while
nothing else executes or waits; a run a person submits makes it stop at its next unit of work and wait in the
queue, and it carries on after theirs."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from flare_core.errors import Cancelled
from flare_core.run import demo, jobs
from flare_core.store.runs import CANCEL_FLAG, RunStore


def _live_worker(store: RunStore, name: str, **fields) -> tuple[object, subprocess.Popen]:
    """A run that reads as executing: a real live process as its worker, a fresh heartbeat."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    run = store.create({"name": name})
    run.update(status="running", pid=proc.pid, host=socket.gethostname(), **fields)
    (run.path / jobs.HEARTBEAT).write_text(repr(time.time()))
    return run, proc


@pytest.fixture
def no_launch(monkeypatch):
    """Workers are not started: each launch is recorded instead (the queue's decisions are under test)."""
    launched: list[str] = []

    def launch(store, run):
        launched.append(run.id)
        run.update(status="running", queue=None)
        return 0

    monkeypatch.setattr(jobs, "_launch", launch)
    return launched


def test_a_person_submitting_a_run_makes_the_demo_give_way(tmp_path, monkeypatch, no_launch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FLARE_MAX_JOBS", "2")
    demo_run, proc = _live_worker(store, "demo", background=True)
    try:
        mine = store.create({"name": "mine"})
        assert jobs.submit(store, mine.id)["run_id"] == mine.id
        assert no_launch == [mine.id]  # a slot was free: the person's run starts at once
        assert demo_run.cancel_requested() and jobs.giving_way(demo_run)  # its flag says why
        assert jobs.background_runs(store) == [demo_run.id]
    finally:
        proc.kill()
        proc.wait()


def test_a_waiting_demo_starts_only_once_no_other_run_executes_or_waits(tmp_path, monkeypatch, no_launch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FLARE_MAX_JOBS", "2")
    busy, proc = _live_worker(store, "a run of mine")
    try:
        waiting_demo = store.create({"name": "demo"})
        result = jobs.submit(store, waiting_demo.id, background=True)
        assert result["status"] == "waiting" and no_launch == []  # a slot is free, but a run of mine works
        assert jobs.waiting_runs(store) == [waiting_demo.id]
        later = store.create({"name": "later"})
        jobs.submit(store, later.id)
        assert no_launch == [later.id]  # the person's run goes first, though submitted after
    finally:
        proc.kill()
        proc.wait()
    busy.update(status="done")
    later.update(status="done")
    assert jobs.dispatch(store) == [waiting_demo.id] and no_launch[-1] == waiting_demo.id


def test_a_demo_that_gives_way_waits_again_instead_of_ending_cancelled(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "demo", "params": {}})
    run.update(background=True)
    (run.path / CANCEL_FLAG).write_text(jobs.GIVE_WAY)

    def stopped(run, progress_bar=False):
        raise Cancelled("cancelled at a checkpoint")

    monkeypatch.setattr("flare_core.run.stages.compute_stages", stopped)
    monkeypatch.setattr(jobs, "_reserve_space", lambda run: None)
    assert jobs.run_in_process(run) == "queued"
    manifest = run.manifest
    assert manifest["queue"]["submitted"] > 0 and not manifest.get("pid") and not jobs.giving_way(run)
    assert not run.artefact(CANCEL_FLAG).exists() and jobs.waiting_runs(store) == [run.id]
    # cancelled by its owner while it gives way: it ends cancelled, not queued again
    other = store.create({"name": "demo 2", "params": {}})
    other.update(background=True, status="running")
    (other.path / CANCEL_FLAG).write_text(jobs.GIVE_WAY)
    jobs.cancel(store, other.id)
    assert other.cancel_requested() and not jobs.giving_way(other)
    assert jobs.run_in_process(other) == "cancelled"


def test_the_demo_is_submitted_in_the_background(tmp_path, monkeypatch):
    submitted = []
    monkeypatch.setattr(jobs, "submit", lambda store, run_id, background=False: submitted.append(background))
    monkeypatch.setattr(demo, "create_run", lambda store, corpus, params, **kw: store.create({"name": "d"}))
    monkeypatch.setattr(demo, "load_corpus", lambda *a, **kw: None)
    monkeypatch.setattr(demo, "demo_corpus_path", lambda: tmp_path / "demo.csv")
    demo.ensure_demo_run(RunStore(tmp_path / "runs"), background=True)
    assert submitted == [True]
