"""Faults while a run computes: a killed worker, a disk that fills up once, a disk that stays full. Every
file the run keeps is complete, the run reads as failed, and it resumes to the uninterrupted result."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store import atomic
from flare_core.store.runs import RunStore
from flare_core.view.results import run_results
from tests.support import STATIC, check_run_files, fast_params, flare_here


def _pair_files(run) -> dict[str, int]:
    """Conditional pairs stored by the flow stage (its store is ``<run>/sufficiency/flow/pairs/``)."""
    folder = run.path / "sufficiency" / "flow" / "pairs"
    if not folder.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in folder.rglob("s*_t*.json")}


@pytest.mark.slow
def test_killed_worker_reads_failed_keeps_its_pairs_and_resumes_to_the_uninterrupted_result(
    tmp_path, small_corpus_path, monkeypatch
):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = fast_params([*STATIC, "tfidf-svd-256"], estimators=["flow"], seed=7)
    store = RunStore(tmp_path / "runs")
    run = create_run(store, corpus, params)
    pid = jobs.start(store, run.id)
    total_pairs = 3 * 2
    deadline = time.monotonic() + 240
    while not _pair_files(run):
        assert time.monotonic() < deadline, "no conditional pair was stored in time"
        assert jobs.effective_status(run) in ("queued", "running"), run.manifest.get("traceback")
        time.sleep(0.05)
    assert run.manifest["pid"] == pid
    os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    kept = _pair_files(run)
    assert 1 <= len(kept) < total_pairs, kept

    assert run.status == "running"  # the manifest still says so: nobody told it otherwise
    monkeypatch.setattr(jobs, "STALE_AFTER_SECONDS", 1.0)
    time.sleep(1.2)
    assert jobs.effective_status(run) == "failed"
    assert check_run_files(run.path, killed=True) > 0

    proc = flare_here("resume", run.id, "--json", "--runs-dir", str(store.root), runs_dir=store.root)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"
    assert run.status == "done"
    after = _pair_files(run)
    assert len(after) == total_pairs
    assert {name: after[name] for name in kept} == kept  # the pairs finished before the kill were reused
    check_run_files(run.path, killed=True)

    reference = create_run(RunStore(tmp_path / "reference"), corpus, params)
    assert jobs.run_in_process(reference) == "done", reference.manifest.get("traceback")
    resumed = run_results(run)["sufficiency"]["flow"]["is_matrix"]
    straight = run_results(reference)["sufficiency"]["flow"]["is_matrix"]
    assert resumed["sources"] == straight["sources"] and resumed["targets"] == straight["targets"]
    np.testing.assert_array_equal(np.array(resumed["nats"], float), np.array(straight["nats"], float))
    np.testing.assert_array_equal(np.array(resumed["per_dim"], float), np.array(straight["per_dim"], float))


def _full_disk(monkeypatch, fail) -> list[Path]:
    """Make ``flare_core.store.atomic`` writes fail with ENOSPC (after writing part of the file) when ``fail(path)``."""
    real = atomic.atomic_write
    failed: list[Path] = []

    def atomic_write(path, write):
        path = Path(path)
        if not fail(path):
            return real(path, write)

        def partial(tmp: str) -> None:
            write(tmp)
            with open(tmp, "r+b") as fh:
                fh.truncate(max(0, os.path.getsize(tmp) // 2))
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        failed.append(path)
        return real(path, partial)

    monkeypatch.setattr(atomic, "atomic_write", atomic_write)
    return failed


@pytest.mark.slow
def test_disk_full_once_while_saving_embeddings_fails_the_run_cleanly(
    tmp_path, small_corpus_path, monkeypatch
):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path / "runs"), corpus, fast_params(STATIC))
    state = {"done": False}

    def fail(path: Path) -> bool:
        if not state["done"] and path.parent == run.path / "embeddings":
            state["done"] = True
            return True
        return False

    failed = _full_disk(monkeypatch, fail)
    assert jobs.run_in_process(run) == "failed"
    assert len(failed) == 1
    manifest = run.manifest
    assert "No space left on device" in manifest["error"] and "OSError" in manifest["error"]
    assert not failed[0].exists()  # the half-written file never appeared under its name
    check_run_files(run.path)

    monkeypatch.undo()  # space is back: the run resumes and finishes
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    assert check_run_files(run.path) > 0
    assert {r["model"] for r in run_results(run)["sufficiency"]["gmm"]["scores"]} == set(STATIC)


@pytest.mark.slow
def test_disk_that_stays_full_leaves_only_complete_files(tmp_path, small_corpus_path, monkeypatch):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path / "runs"), corpus, fast_params(STATIC))
    state = {"full": False}

    def fail(path: Path) -> bool:
        if run.path / "sufficiency" in path.parents:
            state["full"] = True
        return state["full"] and run.path in path.parents

    failed = _full_disk(monkeypatch, fail)
    try:
        status = jobs.run_in_process(run)
    except OSError as exc:  # recording the failure needs the disk too: the error propagates
        assert exc.errno == errno.ENOSPC
    else:
        assert status == "failed"
    assert failed
    assert all(not p.exists() or p.name in ("manifest.json", jobs.HEARTBEAT) for p in failed)
    assert check_run_files(run.path) > 0
    assert run.manifest["status"] in ("running", "failed")
    monkeypatch.setattr(jobs, "STALE_AFTER_SECONDS", 0.5)
    time.sleep(0.6)
    assert jobs.effective_status(run) == "failed"

    monkeypatch.undo()
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    check_run_files(run.path)
