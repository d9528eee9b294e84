"""Background runs: a separate process that survives its starter, can be cancelled, and records crashes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore
from flare_core.view.results import run_results
from tests.support import STATIC, check_run_files, fast_params


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


def test_concurrent_job_limit_is_enforced(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    monkeypatch.setenv("FLARE_MAX_JOBS", "1")
    busy = store.create({"name": "busy"})
    busy.update(status="running", pid=12345)
    (busy.path / jobs.HEARTBEAT).write_text(repr(time.time()))
    store.create({"name": "created, never started"})  # does not count towards the limit
    other = store.create({"name": "other"})
    with pytest.raises(RuntimeError, match="limit 1"):
        jobs.start(store, other.id)


@pytest.mark.slow
def test_two_runs_at_once_complete_and_a_third_is_refused(tmp_path, small_corpus_path, monkeypatch):
    monkeypatch.setenv("FLARE_MAX_JOBS", "2")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column=None)
    store = RunStore(tmp_path / "runs")
    runs = [create_run(store, corpus, fast_params(STATIC, seed=s)) for s in range(3)]
    for run in runs[:2]:
        jobs.start(store, run.id)
    with pytest.raises(RuntimeError, match=r"2 runs are already executing \(limit 2"):
        jobs.start(store, runs[2].id)
    assert runs[2].status == "queued" and not runs[2].has("worker.log")
    for run in runs[:2]:
        assert jobs.wait(store, run.id, timeout=300, poll=0.2) == "done", run.manifest.get("traceback")
        scores = run_results(run)["sufficiency"]["gmm"]["scores"]
        assert {r["model"] for r in scores} == set(STATIC)
        assert all(np.isfinite(r["score"]) for r in scores)
        check_run_files(run.path)
    assert jobs.active_runs(store) == []
