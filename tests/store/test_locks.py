"""The one lock helper (``locks.file_lock``) across processes, and run locks whose owner's liveness is the
kernel lock it holds, not its pid."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import Timeout

from flare_core.errors import RunBusy
from flare_core.store import doctor, locks
from flare_core.store.runs import RunStore

# a second process: takes the helper's lock, says so, holds it until told to go, then notes it let go
# (the note is written while it still holds the lock, so whoever gets the lock next finds it)
_HOLDER = (
    "import sys; from pathlib import Path; from flare_core.store.locks import file_lock\n"
    "with file_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.readline()\n"
    "    Path(sys.argv[2]).write_text('released')\n"
)


def _holder(*args: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_two_processes_contend_for_the_helper_lock_and_one_waits(tmp_path):
    path, note = tmp_path / "deep" / "x.lock", tmp_path / "note"
    holder = _holder(path, note)
    try:
        with pytest.raises(Timeout), locks.file_lock(path, timeout=0):
            pass  # one try while the other process holds it
        with pytest.raises(TimeoutError), locks.file_lock(path, timeout=0.2):
            pass
        holder.stdin.write("go\n")
        holder.stdin.flush()
        with locks.file_lock(path):  # waits until the holder lets go, then holds it
            assert note.read_text() == "released"
            assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_leaves_the_helper_lock_free(tmp_path):
    path = tmp_path / "x.lock"
    holder = _holder(path, tmp_path / "never")
    holder.kill()
    holder.wait()
    with locks.file_lock(path, timeout=30):
        assert not (tmp_path / "never").exists()


def test_threads_of_one_process_exclude_each_other(tmp_path):
    import threading

    path, inside, order = tmp_path / "x.lock", threading.Event(), []

    def second() -> None:
        inside.wait()
        with locks.file_lock(path):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with locks.file_lock(path):
        inside.set()
        thread.join(timeout=0.5)  # it cannot get in while this thread holds the lock
        order.append("first")
    thread.join(timeout=30)
    assert order == ["first", "second"]


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_a_lock_naming_a_live_process_that_holds_nothing_is_stale(tmp_path):
    """Pid reuse as macOS has it (no /proc): the run.lock names a pid that runs, but not the owner."""
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "x"})
    other = _sleeper()
    try:
        stale = {"pid": other.pid, "host": socket.gethostname(), "purpose": "computing it"}
        (run.path / locks.RUN_LOCK).write_text(json.dumps(stale))
        assert locks.read_owner(run.path)["pid"] == other.pid
        assert locks.live_owner(run.path) is None
        kinds = [f.kind for f in doctor.check_run(run.path)]
        assert kinds == ["stale lock"]
        with locks.holding(run.path, "checking it") as owner:
            assert owner["pid"] == os.getpid() == locks.live_owner(run.path)["pid"]
        assert locks.read_owner(run.path) is None
    finally:
        other.kill()
        other.wait()


def test_a_lock_of_another_host_counts_as_live(tmp_path):
    run = RunStore(tmp_path / "runs").create({"name": "x"})
    (run.path / locks.RUN_LOCK).write_text(json.dumps({"pid": 1, "host": "elsewhere.invalid"}))
    assert locks.live_owner(run.path)["host"] == "elsewhere.invalid"
    with pytest.raises(RunBusy, match="process 1 on elsewhere.invalid"):
        locks.acquire(run.path, "resuming it")


def test_the_run_lock_is_reentrant_in_its_process_and_given_up_by_delete(tmp_path):
    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "x"})
    locks.acquire(run.path, "computing it")
    assert locks.acquire(run.path, "checking it")["purpose"] == "checking it"
    assert locks.live_owner(run.path)["purpose"] == "checking it"
    locks.release(run.path)
    assert locks.read_owner(run.path) is None and locks.live_owner(run.path) is None
    path = Path(run.path)
    store.delete(run.id)
    assert not path.exists() and locks._held == {}
