"""Tasks on this machine: one after another in this process, or in a pool of worker processes."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from flare_core.checks import check_int
from flare_core.compute.executor import Executor, Outcome, Resources, worker_id
from flare_core.compute.process_pool import ProcessPool


class LocalExecutor(Executor):
    """Tasks on this machine: serially in this process (``workers=1``) or in a pool of processes.

    - ``workers=1`` (the default): each task runs inside :meth:`wait`, oldest first, with this
      process's torch settings. Exceptions (``Exception`` subclasses) raised by a task come back in
      its :class:`Outcome`; ``KeyboardInterrupt`` and ``SystemExit`` propagate.
    - ``workers > 1``: tasks run in up to ``workers`` worker processes started with ``spawn`` (when a
      task is submitted; idle workers are kept for the next tasks). ``fn`` and ``args`` are pickled
      with each task, so ``fn`` must be importable by name (a module-level function) and the values
      from :meth:`put` are copied into every task that receives them. Torch uses
      ``threads_per_worker`` threads in a worker (default: ``os.cpu_count() // workers``, at least
      1) and deterministic algorithms. An exception raised by a task comes back in its outcome (with
      the worker's traceback as its ``__cause__``); a task whose worker process dies is run again in
      a fresh worker at most ``max_retries`` times, then its outcome's error is :class:`WorkerDied`.
      :meth:`cancel` terminates the workers that run a task; :meth:`close` stops them all. The
      :class:`Resources` of a task are not enforced: each worker runs one task at a time.

    ``threads_per_worker`` and ``max_retries`` only apply to a pool (``workers > 1``).
    """

    name = "local"
    max_in_flight = 1
    remote = False

    def __init__(
        self, workers: int = 1, *, threads_per_worker: int | None = None, max_retries: int = 2
    ) -> None:
        self.workers = check_int(workers, "workers", min_value=1)
        self.threads_per_worker = check_int(
            threads_per_worker, "threads_per_worker", min_value=1, allow_none=True
        )
        self.max_retries = check_int(max_retries, "max_retries", min_value=0)
        self._queue: deque[tuple[Hashable, Callable[..., Any], tuple]] = deque()
        self._pool: ProcessPool | None = None
        if self.workers > 1:
            threads = self.threads_per_worker or max(1, (os.cpu_count() or 1) // self.workers)
            self._pool = ProcessPool(self.workers, threads, self.max_retries)
            self.remote = True
            self.max_in_flight = self.workers + _PREFETCH

    def _keys_in_flight(self) -> Iterable[Hashable]:
        if self._pool is not None:
            return self._pool.keys()
        return (k for k, _, _ in self._queue)

    def _submit(self, key: Hashable, fn: Callable[..., Any], args: tuple, resources: Resources) -> None:
        if self._pool is not None:
            self._pool.submit(key, fn, args)
        else:
            self._queue.append((key, fn, args))

    def in_flight(self) -> int:
        if self._pool is not None:
            return self._pool.in_flight()
        return len(self._queue)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        if self._pool is not None:
            return self._pool.wait(timeout)
        if not self._queue:
            raise ValueError("no task in flight")
        key, fn, args = self._queue.popleft()
        start = time.perf_counter()
        try:
            value = fn(*args)
        except Exception as exc:  # the task's failure is its outcome
            return Outcome(key, error=exc, worker=worker_id(), seconds=time.perf_counter() - start)
        seconds = time.perf_counter() - start
        return Outcome(key, value=value, worker=worker_id(), seconds=seconds)

    def cancel(self) -> None:
        """Drop the queued tasks; in a pool, also terminate the workers running a task."""
        if self._pool is not None:
            self._pool.cancel()
        self._queue.clear()

    def close(self) -> None:
        """Cancel what is in flight and stop every worker process (a later submit starts new ones)."""
        if self._pool is not None:
            self._pool.close()
        self._queue.clear()


# Tasks a pool keeps queued beyond one per worker: the next task is handed to a worker as soon as its
# result is read, before the caller has processed that result and submitted another (with 50 ms tasks
# and 10 ms of caller work per outcome, 2 workers are busy 97% of the time with 1, 82% with 0; 2 adds
# nothing).
_PREFETCH = 1
