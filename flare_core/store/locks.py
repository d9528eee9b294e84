"""Locks on run folders and on the run store: one owner at a time, and a dead owner never blocks anyone.

A run's lock is the file ``<run>/run.lock`` holding its owner's pid, host, process start time and
command. Whoever finds a lock whose owner is gone (the pid no longer exists, or it belongs to another
process since the owner died) takes it over: a SIGKILL never leaves a run locked for good. Checking and
taking a lock happen inside a short ``flock`` on ``<run>/.run.lock.guard``, so two processes that find
the same stale lock cannot both take it.

The store's lock (``<root>/.store.lock``) is a plain ``flock`` held while the job queue decides which
waiting run to start; the kernel releases it when its holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flare_core.errors import RunBusy
from flare_core.store import atomic

RUN_LOCK = "run.lock"
_GUARD = ".run.lock.guard"
STORE_LOCK = ".store.lock"


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` as the kernel records it (Linux), or None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after its closing one
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int, start_time: str | None = None) -> bool:
    """Whether process ``pid`` exists (and, when ``start_time`` is given, is the same process)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    if start_time is not None:
        now = process_start_time(pid)
        if now is not None and now != start_time:
            return False  # the pid was reused by another process after the owner died
        if now is not None and _is_zombie(pid):
            return False
    return True


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].startswith("Z")


def owner_alive(owner: dict[str, Any]) -> bool:
    """Whether the process described by a lock file still runs (a lock of another host counts as live)."""
    if owner.get("host") not in (None, socket.gethostname()):
        return True  # a shared store: only that host can tell; ``flare doctor`` reports it
    return pid_alive(owner.get("pid", -1), owner.get("start_time"))


def read_owner(run_path: Path) -> dict[str, Any] | None:
    """The content of the run's lock file, or None when there is none (or it cannot be read)."""
    try:
        owner = json.loads((run_path / RUN_LOCK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def live_owner(run_path: Path) -> dict[str, Any] | None:
    """The owner of the run's lock if that process still runs, else None."""
    owner = read_owner(run_path)
    return owner if owner is not None and owner_alive(owner) else None


@contextlib.contextmanager
def _guard(run_path: Path) -> Iterator[None]:
    with open(run_path / _GUARD, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def busy_message(run_id: str, owner: dict[str, Any], doing: str) -> str:
    """Words for a person who tried to ``doing`` a run that another process holds."""
    what = owner.get("purpose") or "working on it"
    return (
        f"run {run_id} is busy: process {owner.get('pid')} on {owner.get('host')} has been {what} since "
        f"{owner.get('since')}. Wait for it to finish (`flare runs` shows its progress) or stop it with "
        f"`flare cancel {run_id}`, then {doing} again."
    )


def acquire(run_path: Path, purpose: str, *, doing: str = "try") -> dict[str, Any]:
    """Take the run's lock for this process or raise ``RunBusy``; a lock of a dead process is replaced.

    Returns the lock's content. Taking a lock this process already holds succeeds (re-entrant by pid).
    """
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start_time": process_start_time(os.getpid()),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "purpose": purpose,
        "command": " ".join(sys.argv)[:300],
    }
    with _guard(run_path):
        owner = read_owner(run_path)
        if owner is not None and owner.get("pid") != me["pid"] and owner_alive(owner):
            raise RunBusy(busy_message(run_path.name, owner, doing), owner)
        atomic.write_json(run_path / RUN_LOCK, me)
    return me


def release(run_path: Path) -> None:
    """Remove the run's lock if this process holds it (a folder deleted meanwhile is fine)."""
    if not run_path.is_dir():
        return
    with contextlib.suppress(FileNotFoundError), _guard(run_path):
        owner = read_owner(run_path)
        if owner is not None and owner.get("pid") == os.getpid():
            (run_path / RUN_LOCK).unlink(missing_ok=True)


@contextlib.contextmanager
def holding(run_path: Path, purpose: str, *, doing: str = "try") -> Iterator[dict[str, Any]]:
    """``with holding(run.path, "computing it"):`` the run's lock for the block (see :func:`acquire`)."""
    owner = acquire(run_path, purpose, doing=doing)
    try:
        yield owner
    finally:
        release(run_path)


@contextlib.contextmanager
def store_lock(root: Path) -> Iterator[None]:
    """Exclusive lock on the whole store for a short critical section (the queue's decisions)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / STORE_LOCK, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
