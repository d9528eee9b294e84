"""Background execution of runs.

A run executes in its own process (``python -m flare_core.run.jobs RUN_ID``), started in a new session
so that it outlives the Streamlit script and the browser tab that started it. The worker writes its
progress to the run's manifest, beats a heartbeat file every few seconds, honours cancellation
requests between units of work, and marks the run ``failed`` with the error if anything raises.
A run whose heartbeat stopped while it claimed to be running is reported as failed (its worker died).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from flare_core.errors import Cancelled
from flare_core.store import atomic
from flare_core.store.runs import FINISHED, Run, RunStore, utc_now

HEARTBEAT = "worker.heartbeat"
HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 60.0


def max_concurrent_jobs() -> int:
    """``$FLARE_MAX_JOBS`` (default 2): the most runs that may execute at once."""
    return max(1, int(os.environ.get("FLARE_MAX_JOBS", "2")))


def active_runs(store: RunStore) -> list[str]:
    """Ids of runs whose worker was started and is still alive (created-but-unstarted runs do not count)."""
    return [
        m["id"]
        for m in store.list()
        if m.get("pid") and effective_status(store.get(m["id"])) in ("queued", "running")
    ]


def start(store: RunStore, run_id: str) -> int:
    """Start the worker process for ``run_id`` and return its pid.

    Raises ``RuntimeError`` when ``max_concurrent_jobs()`` runs are already active.
    """
    run = store.get(run_id)
    busy = [r for r in active_runs(store) if r != run_id]
    if len(busy) >= max_concurrent_jobs():
        raise RuntimeError(
            f"{len(busy)} runs are already executing (limit {max_concurrent_jobs()}, set FLARE_MAX_JOBS to change it); "
            "wait for one to finish or cancel it"
        )
    log = open(run.artefact("worker.log"), "ab")  # noqa: SIM115 - handed to the child process
    cmd = [sys.executable, "-m", "flare_core.run.jobs", "--runs-dir", str(store.root.resolve()), run_id]
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    log.close()
    run.update(pid=proc.pid, status="queued", started=utc_now())
    _beat(run)  # the run is alive from the moment it is started
    return proc.pid


def cancel(store: RunStore, run_id: str) -> None:
    """Ask the worker of ``run_id`` to stop at its next checkpoint."""
    run = store.get(run_id)
    if run.status in FINISHED:
        return
    run.request_cancel()
    if run.status == "queued" and not _alive(run):
        run.update(status="cancelled", finished=utc_now())


def effective_status(run: Run) -> str:
    """The manifest's status, except that a running run whose worker stopped beating reads ``failed``."""
    manifest = run.manifest
    status = manifest.get("status", "queued")
    if status == "queued" and not manifest.get("pid"):
        return "queued"  # created, never started: nothing has died
    if status in ("queued", "running") and not _alive(run):
        return "failed"
    return status


def wait(store: RunStore, run_id: str, timeout: float = 600.0, poll: float = 0.5) -> str:
    """Block until ``run_id`` is finished (or ``timeout`` seconds pass); return its effective status."""
    deadline = time.monotonic() + timeout
    while True:
        status = effective_status(store.get(run_id))
        if status in FINISHED or time.monotonic() > deadline:
            return status
        time.sleep(poll)


def run_in_process(run: Run, *, progress_bar: bool = False) -> str:
    """Execute ``run`` in this process with heartbeat, cancellation and failure handling; return its status."""
    from flare_core.run.stages import compute_stages  # imported here: the stages import torch and the models

    for leftover in run.path.rglob(".tmp-*"):  # interrupted atomic writes of an earlier worker
        leftover.unlink(missing_ok=True)
    stop = threading.Event()
    beater = threading.Thread(target=_beat_forever, args=(run, stop), daemon=True)
    beater.start()
    try:
        run.update(status="running", pid=os.getpid(), error=None)
        compute_stages(run, progress_bar=progress_bar)
        run.update(status="done", finished=utc_now(), progress=None)
    except (Cancelled, KeyboardInterrupt):
        run.update(status="cancelled", finished=utc_now())
    except BaseException as exc:  # noqa: BLE001 - every failure must be recorded on the run
        run.update(
            status="failed",
            finished=utc_now(),
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(limit=20),
        )
    finally:
        stop.set()
        beater.join(timeout=2)
    return run.status


def _beat(run: Run) -> None:
    atomic.write_text(run.artefact(HEARTBEAT), repr(time.time()))


def _beat_forever(run: Run, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            _beat(run)
        stop.wait(HEARTBEAT_SECONDS)


def _alive(run: Run) -> bool:
    path = run.artefact(HEARTBEAT)
    try:
        last = float(path.read_text())
    except (OSError, ValueError):
        return False
    return time.time() - last < STALE_AFTER_SECONDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Execute one stored FLARE Studio run (the background worker)."
    )
    parser.add_argument("run_id")
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    run = RunStore(args.runs_dir).get(args.run_id)
    status = run_in_process(run)
    return 0 if status in ("done", "cancelled") else 1


if __name__ == "__main__":
    sys.exit(main())
