"""Locks on run folders and on the run store: one owner at a time, and a dead owner never blocks anyone.

Every lock here is :func:`file_lock`, a kernel lock (``flock`` through the pinned ``filelock``) on a file:
one holder across processes and threads, released by the kernel when its holder exits or is killed.

A run's owner holds ``file_lock(<run>/.run.lock.held)`` for as long as it works on the run, and names
itself in ``<run>/run.lock`` (pid, host, process start time, since when, what for, command) for the
messages people read and for ``flare doctor``. Whether an owner still runs is read from the kernel lock,
not from its pid: a process that died, even by SIGKILL, holds nothing, whatever process took its pid
since (on Linux and macOS alike, where the old check read ``/proc`` and macOS has none). A ``run.lock``
left behind names a dead owner and is taken over. Taking, probing and giving up a run's lock happen inside
a short ``file_lock`` on ``<run>/.run.lock.guard``, so that a probe never makes a taker fail.

The store's lock (``<root>/.store.lock``) is a ``file_lock`` held while the job queue decides which
waiting run to start.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import BaseFileLock, FileLock, Timeout

from flare_core.errors import RunBusy
from flare_core.store import atomic

RUN_LOCK = "run.lock"
_GUARD = ".run.lock.guard"
_HELD = ".run.lock.held"
STORE_LOCK = ".store.lock"

_held: dict[Path, BaseFileLock] = {}  # the runs this process owns: resolved run folder -> its kernel lock
_held_guard = threading.Lock()


def file_lock(path: Path, *, timeout: float | None = None) -> BaseFileLock:
    """An exclusive lock on ``path`` (created, with its folder, when missing): ``with file_lock(path):``.

    One holder at a time across processes and threads; the kernel releases it when its holder dies. It
    waits as long as it takes, or ``timeout`` seconds at most (``0``: one try), then raises
    ``filelock.Timeout`` (a ``TimeoutError``).
    """
    return FileLock(path, timeout=-1 if timeout is None else timeout)


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
    """Whether process ``pid`` exists (and, when ``start_time`` is given, is the same process).

    The job queue's check of its workers, beside their heartbeat (which goes stale within seconds of a
    worker's death whatever this says); run locks do not use it.
    """
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


def read_owner(run_path: Path) -> dict[str, Any] | None:
    """The content of the run's lock file, or None when there is none (or it cannot be read)."""
    try:
        owner = json.loads((run_path / RUN_LOCK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def _key(run_path: Path) -> Path:
    return run_path.resolve()


def _held_elsewhere(run_path: Path) -> bool:
    """Whether another process holds the run's kernel lock (the caller holds the guard)."""
    try:
        with file_lock(run_path / _HELD, timeout=0):
            return False
    except Timeout:
        return True


def live_owner(run_path: Path) -> dict[str, Any] | None:
    """The owner of the run's lock if that process still holds it, else None.

    A lock of another host counts as live (a shared store: only that host can tell; ``flare doctor``
    reports it), and so does one whose kernel lock cannot be probed here (a read-only folder).
    """
    owner = read_owner(run_path)
    if owner is None or owner.get("host") not in (None, socket.gethostname()):
        return owner
    with _held_guard:
        if _key(run_path) in _held:
            return owner
    try:
        with file_lock(run_path / _GUARD):
            return owner if _held_elsewhere(run_path) else None
    except OSError:
        return owner


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

    Returns the lock's content. Taking a lock this process already holds succeeds (re-entrant by process).
    """
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start_time": process_start_time(os.getpid()),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "purpose": purpose,
        "command": " ".join(sys.argv)[:300],
    }
    key = _key(run_path)
    with file_lock(run_path / _GUARD), _held_guard:
        owner = read_owner(run_path)
        if key not in _held:
            if owner is not None and owner.get("host") not in (None, me["host"]):
                raise RunBusy(busy_message(run_path.name, owner, doing), owner)
            held = file_lock(run_path / _HELD, timeout=0)
            try:
                held.acquire()
            except Timeout:
                raise RunBusy(busy_message(run_path.name, owner or {}, doing), owner or {}) from None
            _held[key] = held
        atomic.write_json(run_path / RUN_LOCK, me)
    return me


def release(run_path: Path) -> None:
    """Give up the run's lock if this process holds it (a folder deleted or renamed meanwhile is fine)."""
    with _held_guard:
        held = _held.pop(_key(run_path), None)
    if held is None:
        return
    try:
        if run_path.is_dir():
            with file_lock(run_path / _GUARD):
                owner = read_owner(run_path)
                if owner is not None and owner.get("pid") == os.getpid():
                    (run_path / RUN_LOCK).unlink(missing_ok=True)
    finally:
        held.release(force=True)


@contextlib.contextmanager
def holding(run_path: Path, purpose: str, *, doing: str = "try") -> Iterator[dict[str, Any]]:
    """``with holding(run.path, "computing it"):`` the run's lock for the block (see :func:`acquire`)."""
    owner = acquire(run_path, purpose, doing=doing)
    try:
        yield owner
    finally:
        release(run_path)


def store_lock(root: Path) -> BaseFileLock:
    """Exclusive lock on the whole store for a short critical section (the queue's decisions)."""
    root.mkdir(parents=True, exist_ok=True)
    return file_lock(root / STORE_LOCK)
