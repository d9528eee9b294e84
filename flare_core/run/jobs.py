"""Background execution of runs.

A run executes in its own process (``python -m flare_core.run.jobs RUN_ID``), started in a new session
so that it outlives the Streamlit script and the browser tab that started it. The worker writes its
progress to the run's manifest, beats a heartbeat file every few seconds, honours cancellation
requests between units of work, and marks the run ``failed`` with the error if anything raises.
A run whose heartbeat stopped, or whose worker process no longer exists, while it claimed to be running
is reported as failed (its worker died).

At most ``$FLARE_MAX_JOBS`` runs execute at once. :func:`submit` puts a run in the queue (kept in its
manifest: status ``queued``, a ``queue`` entry, no worker yet) and :func:`dispatch` starts waiting runs in
the order they were submitted whenever a slot is free; workers dispatch when they finish, and so do the
``flare`` commands and the Runs page, so the queue needs no long-lived scheduler and survives restarts.
Every process that computes a run holds the run's lock (:mod:`flare_core.store.locks`).

A run submitted in the background (the demo) gives way to a person's own runs: it starts only while no
other run executes or waits, and when one is submitted while it computes, it stops at its next unit of work
and waits in the queue again, to carry on where it stopped once the others have finished.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from flare_core.compute.executor import forget_server_secrets, worker_environment
from flare_core.errors import Cancelled, DamagedFile, RunBusy, RunNotFound
from flare_core.run.outcomes import problems
from flare_core.store import atomic, doctor, locks
from flare_core.store.runs import CANCEL_FLAG, FINISHED, Run, RunStore, utc_now

HEARTBEAT = "worker.heartbeat"
HEARTBEAT_SECONDS = 5.0
STALE_AFTER_SECONDS = 60.0


def max_concurrent_jobs() -> int:
    """``$FLARE_MAX_JOBS`` (default 2): the most runs that may execute at once."""
    try:
        return max(1, int(os.environ.get("FLARE_MAX_JOBS", "2")))
    except ValueError:
        raise ValueError(
            f"FLARE_MAX_JOBS must be a whole number of runs, got {os.environ['FLARE_MAX_JOBS']!r}"
        ) from None


def worker_niceness() -> int:
    """``$FLARE_WORKER_NICE`` (default 10, 0 to 19): how much lower than the process that starts it a
    background worker's CPU priority is, so that the dashboard's pages and the shell keep answering while
    runs compute (a busy worker still gets every cycle that nobody else asks for)."""
    value = os.environ.get("FLARE_WORKER_NICE", "10")
    try:
        niceness = int(value)
    except ValueError:
        niceness = -1
    if not 0 <= niceness <= 19:
        raise ValueError(f"FLARE_WORKER_NICE must be a whole number from 0 to 19, got {value!r}")
    return niceness


def lower_priority() -> int:
    """Lower this process's CPU priority by :func:`worker_niceness`; returns the new niceness.

    A worker starts its own session, and where Linux groups each session's processes for the scheduler
    (``sched_autogroup``, on by default on desktops), a process's nice value only weighs against the
    processes of its own session: the worker's group would still take an equal share of the CPU beside
    the dashboard's. So the worker's session group is made as nice as the worker itself.
    """
    niceness = worker_niceness()
    try:
        with open("/proc/self/autogroup", "w") as group:  # noqa: PTH123 - a kernel file, not a path
            group.write(str(niceness))
    except OSError:  # no autogroups (other systems, kernels without them): the nice value is enough
        pass
    return os.nice(niceness)


def active_runs(store: RunStore) -> list[str]:
    """Ids of runs whose worker was started and is still alive (created-but-unstarted runs do not count)."""
    found = []
    for manifest in store.list():
        if not manifest.get("pid"):
            continue
        with contextlib.suppress(RunNotFound, OSError, ValueError):
            if effective_status(store.get(manifest["id"])) in ("queued", "running"):
                found.append(manifest["id"])
    return found


def waiting_runs(store: RunStore) -> list[str]:
    """Ids of runs waiting in the queue for a free slot, first to start first: a person's runs in the order
    they were submitted, then the background runs."""
    waiting = [
        (bool(m.get("background")), m["queue"].get("submitted", 0), m["id"])
        for m in store.list()
        if m.get("status") == "queued" and isinstance(m.get("queue"), dict) and not m.get("pid")
    ]
    return [run_id for _, _, run_id in sorted(waiting)]


#: What the cancel flag of a background run says when it was asked to give way (a cancel says a time).
GIVE_WAY = "give way"


def giving_way(run: Run) -> bool:
    """Whether ``run`` was asked to stop for a person's run and wait again (not to be cancelled)."""
    try:
        return run.artefact(CANCEL_FLAG).read_text() == GIVE_WAY
    except OSError:
        return False


def background_runs(store: RunStore) -> list[str]:
    """Ids of the background runs (the demo) that execute or wait: they give way to every other run."""
    return [
        m["id"]
        for m in store.list()
        if m.get("background")
        and m.get("status") in ("queued", "running")
        and (m.get("pid") or m.get("queue"))
    ]


def _give_way(store: RunStore) -> list[str]:
    """Ask every executing background run to stop at its next unit of work and wait in the queue again
    (the caller holds the store lock); returns their ids."""
    asked = []
    for run_id in active_runs(store):
        run = store.get(run_id)
        if run.manifest.get("background") and not run.cancel_requested():
            # the cancel flag says why, in its own file: the worker rewrites its manifest all the while
            atomic.write_text(run.artefact(CANCEL_FLAG), GIVE_WAY)
            asked.append(run_id)
    return asked


def queue_position(store: RunStore, run_id: str) -> int | None:
    """1 for the next run to start, 2 for the one after...; None when ``run_id`` is not waiting."""
    waiting = waiting_runs(store)
    return waiting.index(run_id) + 1 if run_id in waiting else None


def submit(store: RunStore, run_id: str, *, background: bool = False) -> dict[str, Any]:
    """Put ``run_id`` in the job queue and start it at once if a slot is free.

    A ``background`` run (the demo) starts only while no other run executes or waits; a run submitted
    otherwise makes executing background runs give way (they stop at their next unit of work and wait).

    Runs beyond ``max_concurrent_jobs()`` wait (status ``queued``, no worker) and are started in the order
    they were submitted as running ones finish, by whichever ``flare`` command, worker or dashboard page
    runs next (:func:`dispatch`); the queue lives in the manifests, so it survives a restart of the app.
    Returns ``{"run_id", "status": "started" | "waiting", "pid", "position", "message"}``.
    """
    run = store.get(run_id)
    with locks.store_lock(store.root):
        owner = locks.live_owner(run.path)
        if owner is not None:
            raise RunBusy(locks.busy_message(run.id, owner, "submit it"), owner)
        if (
            run.status == "done"
            and not problems(run.manifest)
            and not any(f.kind == "damaged" for f in doctor.check_run(run.path))
        ):
            raise ValueError(f"run {run.id} is already done; nothing to start")
        if run.cancel_requested():
            run.artefact(CANCEL_FLAG).unlink(missing_ok=True)
        run.update(
            status="queued", pid=None, error=None, queue={"submitted": time.time_ns()}, background=background
        )
        if not background:
            _give_way(store)
        _dispatch_locked(store)
    manifest = run.manifest
    if manifest.get("pid"):
        return {
            "run_id": run.id,
            "status": "started",
            "pid": manifest["pid"],
            "position": None,
            "message": f"run {run.id} started (worker process {manifest['pid']})",
        }
    position = queue_position(store, run.id)
    limit = max_concurrent_jobs()
    return {
        "run_id": run.id,
        "status": "waiting",
        "pid": None,
        "position": position,
        "message": (
            f"run {run.id} is queued, position {position}: {limit} runs are executing (limit {limit}, "
            "set FLARE_MAX_JOBS to change it); it starts by itself when one finishes. "
            f"`flare runs` shows the queue; `flare cancel {run.id}` takes it out."
        ),
    }


def start(store: RunStore, run_id: str) -> int | None:
    """Submit ``run_id`` (see :func:`submit`); return its worker's pid, or None when it waits in the queue."""
    return submit(store, run_id)["pid"]


def dispatch(store: RunStore) -> list[str]:
    """Start waiting runs, oldest first, while fewer than ``max_concurrent_jobs()`` execute; return their ids.

    Safe to call from any process at any time (a store-wide lock serialises the decisions): workers call
    it when they finish, and every ``flare`` command and the Runs page call it, so a slot freed by a
    worker that was killed is filled too.
    """
    if not store.root.is_dir():
        return []
    with locks.store_lock(store.root):
        return _dispatch_locked(store)


def _dispatch_locked(store: RunStore) -> list[str]:
    started: list[str] = []
    active = active_runs(store)
    free = max_concurrent_jobs() - len(active)
    waiting = waiting_runs(store)
    background = {m["id"] for m in store.list() if m.get("background")}
    others = [r for r in active + waiting if r not in background]
    for run_id in waiting:
        if free <= 0:
            break
        try:
            run = store.get(run_id)
            if run_id in background and others:
                continue  # the demo waits while a person's run executes or waits
            if locks.live_owner(run.path) is not None:
                continue  # someone resumes it in the foreground
            _launch(store, run)
        except (RunNotFound, OSError) as exc:  # deleted meanwhile, or the disk refused the log file
            with contextlib.suppress(RunNotFound, OSError, ValueError):
                store.get(run_id).update(
                    status="failed", queue=None, finished=utc_now(), error=f"could not start: {exc}"
                )
            continue
        started.append(run_id)
        free -= 1
    return started


def _launch(store: RunStore, run: Run) -> int:
    """Start the worker process of ``run`` (the caller holds the store lock and checked the limit)."""
    log = open(run.artefact("worker.log"), "ab")  # noqa: SIM115 - handed to the child process
    cmd = [sys.executable, "-m", "flare_core.run.jobs", "--runs-dir", str(store.root.resolve()), run.id]
    proc = subprocess.Popen(
        cmd,
        env=worker_environment(),  # the dashboard's owner token stays in the dashboard's process
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    log.close()
    # the heartbeat first: a reader that finds the pid must find a fresh heartbeat too, or it would read
    # a worker that is still starting as one that died
    _beat(run)
    run.update(
        pid=proc.pid,
        host=socket.gethostname(),
        status="queued",
        queue=None,
        started=utc_now(),
        launched_ns=time.time_ns(),
        pid_start_time=locks.process_start_time(proc.pid),
    )
    # collect its exit status as soon as it ends: a finished worker leaves no <defunct> entry under the
    # process that started it (the dashboard runs for days)
    threading.Thread(target=proc.wait, name=f"reap-worker-{proc.pid}", daemon=True).start()
    return proc.pid


def cancel(store: RunStore, run_id: str) -> None:
    """Ask the worker of ``run_id`` to stop at its next checkpoint; a run waiting in the queue is taken
    out."""
    run = store.get(run_id)
    if run.status in FINISHED:
        return
    with locks.store_lock(store.root):
        run.request_cancel()  # over a request to give way: cancelled, not queued again
        if run.status == "queued" and not _alive(run) and locks.live_owner(run.path) is None:
            run.update(status="cancelled", queue=None, finished=utc_now())


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
    """Execute ``run`` in this process with heartbeat, cancellation and failure handling; return its status.

    The run's lock (``flare_core.store.locks``) is held throughout: a second process that tries to compute,
    resume or delete the same run gets ``RunBusy`` with the owner's pid, and this run's manifest is not
    touched by it. A lock left by a process that died is taken over.
    """
    from flare_core.run.stages import compute_stages  # imported here: the stages import torch and the models

    locks.acquire(run.path, "computing it", doing="resume it")
    try:
        store = RunStore(run.path.parent)
        try:  # damaged files the stages compute are set aside and computed again; others stop here
            repairs = doctor.prepare_resume(store, run.id)
        except DamagedFile as exc:
            with contextlib.suppress(DamagedFile, OSError):
                run.update(status="failed", finished=utc_now(), error=str(exc))
            raise
        if repairs:  # files were set aside: every stage is checked again, not only those that failed
            run.update(repairs=[*run.manifest.get("repairs", []), *repairs], outcomes={})
        with locks.store_lock(run.path.parent):  # taken out of the queue, so no worker is started for it
            run.update(
                status="running",
                pid=os.getpid(),
                host=socket.gethostname(),
                pid_start_time=locks.process_start_time(os.getpid()),
                queue=None,
                error=None,
            )
        for leftover in run.path.rglob(".tmp-*"):  # interrupted atomic writes of an earlier worker
            leftover.unlink(missing_ok=True)
        reserve = _reserve_space(run)
        stop = threading.Event()
        beater = threading.Thread(target=_beat_forever, args=(run, stop), daemon=True)
        beater.start()
        try:
            compute_stages(run, progress_bar=progress_bar)
            run.update(status="done", finished=utc_now(), progress=None)
        except (Cancelled, KeyboardInterrupt):
            if giving_way(run):  # a background run stopped for a person's run: it waits again
                run.artefact(CANCEL_FLAG).unlink(missing_ok=True)
                run.update(status="queued", pid=None, queue={"submitted": time.time_ns()})
            else:
                run.update(status="cancelled", finished=utc_now())
        except BaseException as exc:  # noqa: BLE001 - every failure must be recorded on the run
            if reserve is not None:  # a full disk: free the reserve so that the failure can be recorded
                reserve.unlink(missing_ok=True)
            run.update(
                status="failed",
                finished=utc_now(),
                error=failure_words(run, exc),
                traceback=traceback.format_exc(limit=20),
            )
        finally:
            stop.set()
            beater.join(timeout=2)
            if reserve is not None:
                reserve.unlink(missing_ok=True)
        return run.status
    finally:
        locks.release(run.path)


RESERVE = ".space-reserve"
RESERVE_BYTES = 256 * 1024


def _reserve_space(run: Run) -> Path | None:
    """Write ``RESERVE_BYTES`` to a file of the run, deleted when the run fails, so that the failure (and a
    full disk in words) can be written to the manifest even when the disk filled up; None if no room."""
    path = run.path / RESERVE
    try:
        with open(path, "wb") as fh:
            fh.write(b"\0" * RESERVE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        path.unlink(missing_ok=True)
        return None
    return path


def failure_words(run: Run, exc: BaseException) -> str:
    """The error recorded on a failed run: what happened in words, then the exception."""
    raw = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full: free space and run `flare resume {run.id}` ({raw})"
    return raw


def _beat(run: Run) -> None:
    atomic.write_text(run.artefact(HEARTBEAT), repr(time.time()))


def _beat_forever(run: Run, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            _beat(run)
        stop.wait(HEARTBEAT_SECONDS)


def _alive(run: Run) -> bool:
    """Whether the run's worker is alive: its heartbeat is fresh and its process (when known here) exists."""
    path = run.artefact(HEARTBEAT)
    try:
        last = float(path.read_text())
    except (OSError, ValueError):
        return False
    if time.time() - last >= STALE_AFTER_SECONDS:
        return False
    manifest = run.manifest
    pid = manifest.get("pid")
    if pid and manifest.get("host") == socket.gethostname():
        return locks.pid_alive(pid, manifest.get("pid_start_time"))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Execute one stored FLARE Studio run (the background worker)."
    )
    parser.add_argument("run_id")
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    forget_server_secrets()  # a worker started some other way than by _launch: its pools and Ray get none
    store = RunStore(args.runs_dir)
    lower_priority()
    try:
        status = run_in_process(store.get(args.run_id))
    except RunBusy as exc:  # resumed in the foreground meanwhile: that process owns the run
        print(f"worker {os.getpid()}: {exc}", file=sys.stderr)
        return 0
    except DamagedFile as exc:  # recorded on the run when its manifest is readable
        print(f"worker {os.getpid()}: {exc}", file=sys.stderr)
        return 1
    finally:
        dispatch(store)  # this slot is free: start the next waiting run
    return 0 if status in ("done", "cancelled") else 1


if __name__ == "__main__":
    sys.exit(main())
