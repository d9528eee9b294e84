"""The worker processes of a :class:`~flare_core.compute.local.LocalExecutor` with ``workers > 1``."""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import signal
import socket
import time
import traceback
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_any
from typing import Any

from flare_core.compute.executor import Outcome, configure_torch, forget_server_secrets, invoke, worker_id
from flare_core.errors import RemoteTraceback, WorkerDied


@dataclass
class _Task:
    """A submitted task: its key, ``pickle((fn, args))`` and how many of its workers died."""

    key: Hashable
    payload: bytes
    deaths: int = 0


@dataclass
class _Worker:
    """One worker process, the parent's end of its pipe, the task it runs (None when idle) and, once
    it is stopped, its exit code."""

    process: Any  # multiprocessing.context.SpawnProcess
    conn: Connection
    id: str
    task: _Task | None = None
    exitcode: int | None = None


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else a RuntimeError carrying its type and message."""
    try:
        pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """Terminating a busy worker unwinds its task, so its cleanup runs (temporary files are removed)."""
    raise SystemExit(128 + signum)


def _worker_main(conn: Connection, threads: int) -> None:
    """A pool worker: receive ``pickle((fn, args))``, run it through :func:`invoke`, send the outcome.

    Replies are ``("ok", value, worker, seconds)`` or ``("error", exception, traceback text, worker,
    seconds)``. The worker returns (and its process exits) when the parent closes the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops the workers
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    forget_server_secrets()  # no task reads the owner's credential, whoever started the pool
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        start = time.perf_counter()
        try:
            fn, args = pickle.loads(payload)  # imports fn's module the first time
            configure_torch(threads)
            start = time.perf_counter()
            value, worker, seconds = invoke(fn, threads, *args)
            reply = pickle.dumps(("ok", value, worker, seconds), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # the task's failure (or an unpicklable value) is its outcome
            seconds = time.perf_counter() - start
            error = ("error", _portable(exc), traceback.format_exc(), worker_id(), seconds)
            reply = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
        del payload
        try:
            conn.send_bytes(reply)
        except OSError:  # the parent is gone or dropped this pool
            return


def _exit_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


class ProcessPool:
    """The worker processes of a :class:`LocalExecutor` with ``workers > 1``.

    Each worker has its own pipe and runs one task at a time, so the parent knows which task a dead
    worker was running: only that task is run again, in a fresh worker, while the others go on
    undisturbed, and :meth:`cancel` can terminate exactly the busy workers. (A
    ``concurrent.futures.ProcessPoolExecutor`` breaks as a whole when one worker dies, failing every
    pending future without telling which task killed it, and cannot stop a running task.)
    """

    def __init__(self, size: int, threads: int, max_retries: int) -> None:
        self.size = size
        self.threads = threads
        self.max_retries = max_retries
        self._context = multiprocessing.get_context("spawn")  # never fork a process with torch threads
        self._queue: deque[_Task] = deque()  # submitted, not yet handed to a worker
        self._done: deque[Outcome] = deque()  # finished, not yet returned by wait()
        self._workers: list[_Worker] = []

    def keys(self) -> list[Hashable]:
        running = [w.task.key for w in self._workers if w.task is not None]
        return [t.key for t in self._queue] + running + [o.key for o in self._done]

    def in_flight(self) -> int:
        return len(self._queue) + len(self._done) + sum(w.task is not None for w in self._workers)

    def submit(self, key: Hashable, fn: Callable[..., Any], args: tuple) -> None:
        try:
            payload = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise ValueError(
                f"task {key!r} cannot be sent to a worker process: fn must be a module-level function and "
                f"fn and args must pickle ({type(exc).__name__}: {exc})"
            ) from exc
        self._queue.append(_Task(key, payload))
        self._dispatch()

    def wait(self, timeout: float | None) -> Outcome | None:
        if not self.in_flight():
            raise ValueError("no task in flight")
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            self._dispatch()
            if self._done:
                return self._done.popleft()
            busy = [w for w in self._workers if w.task is not None]
            if not busy:  # cannot happen: after _dispatch a task is queued only while every worker is busy
                raise RuntimeError("tasks in flight but no worker is running one")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = set(wait_for_any([w.conn for w in busy] + [w.process.sentinel for w in busy], remaining))
            if not ready:
                return None
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    self._collect(worker)
            if not self._done and deadline is not None and time.monotonic() >= deadline:
                self._dispatch()
                return None

    def cancel(self) -> None:
        self._queue.clear()
        self._done.clear()
        stopping = []
        for worker in [w for w in self._workers if w.task is not None]:
            worker.task = None
            finished = False
            with contextlib.suppress(EOFError, OSError):
                if worker.conn.poll():  # its result is already in the pipe: read it, keep the worker
                    worker.conn.recv_bytes()
                    finished = True
            if not (finished and worker.process.is_alive()):
                stopping.append(worker)
        self._stop(stopping)

    def close(self) -> None:
        self.cancel()
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.conn.close()  # an idle worker reads end of file and returns
        for worker in workers:
            worker.process.join(timeout=5)
        self._stop(workers)

    def _start_worker(self) -> _Worker:
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=_worker_main, args=(child, self.threads), name="flare-executor-worker", daemon=True
        )
        process.start()
        child.close()
        worker = _Worker(process, parent, f"{socket.gethostname()}:{process.pid}")
        self._workers.append(worker)
        return worker

    def _dispatch(self) -> None:
        """Hand queued tasks to idle workers, starting workers (all at once) up to the pool size."""
        for worker in [w for w in self._workers if w.task is None and not w.process.is_alive()]:
            self._stop([worker])  # an idle worker that died (killed from outside): no task is charged
        idle = sum(w.task is None for w in self._workers)
        for _ in range(min(len(self._queue) - idle, self.size - len(self._workers))):
            self._start_worker()
        while self._queue:
            worker = next((w for w in self._workers if w.task is None), None)
            if worker is None:
                if len(self._workers) >= self.size:
                    return
                worker = self._start_worker()
            worker.task = self._queue.popleft()
            try:
                worker.conn.send_bytes(worker.task.payload)
            except OSError:  # the worker is gone already
                self._lost(worker)

    def _collect(self, worker: _Worker) -> None:
        """Read the reply of a busy ``worker`` whose pipe or process is ready, or handle its death."""
        task = worker.task
        assert task is not None
        try:
            data = worker.conn.recv_bytes() if worker.conn.poll() else None
        except (EOFError, OSError):
            data = None
        if data is None:
            self._lost(worker)
            return
        worker.task = None
        try:
            reply = pickle.loads(data)
        except Exception as exc:  # the value cannot be rebuilt in this process
            self._done.append(Outcome(task.key, error=exc, worker=worker.id))
            return
        if reply[0] == "ok":
            _, value, worker_id, seconds = reply
            self._done.append(Outcome(task.key, value=value, worker=worker_id, seconds=seconds))
        else:
            _, error, text, worker_id, seconds = reply
            error.__cause__ = RemoteTraceback(text)
            self._done.append(Outcome(task.key, error=error, worker=worker_id, seconds=seconds))

    def _lost(self, worker: _Worker) -> None:
        """``worker`` died: queue its task again (first, for a fresh worker) or, past its retries, fail it."""
        task = worker.task
        worker.task = None
        self._stop([worker])
        if task is None:
            return
        task.deaths += 1
        if task.deaths <= self.max_retries:
            self._queue.appendleft(task)
            return
        error = WorkerDied(
            f"the worker process running task {task.key!r} died ({_exit_text(worker.exitcode)}) on each "
            f"of its {task.deaths} attempts (max_retries={self.max_retries})"
        )
        self._done.append(Outcome(task.key, error=error, worker=worker.id))

    def _stop(self, workers: list[_Worker]) -> None:
        """Terminate ``workers`` (SIGTERM, then SIGKILL after a second), reap them, release their pipes."""
        for worker in workers:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in workers:
            worker.process.join(timeout=1)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.exitcode = worker.process.exitcode
            worker.process.close()
            worker.conn.close()
            if worker in self._workers:
                self._workers.remove(worker)
