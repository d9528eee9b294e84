"""Where the units of a computation run: in this process or a pool of worker processes on this machine
(``local``), or on a Ray cluster (``ray``).

An :class:`Executor` runs independent tasks ``fn(*args)`` identified by a hashable key and hands back
each one's :class:`Outcome` (its value or the exception it raised, the worker that ran it and how long
the task took there) as it finishes::

    with get_executor("local", workers=4) as ex:
        ex.submit(("marginal", "b"), fit, (v_train, v_val), Resources(num_cpus=1))
        while ex.in_flight():
            outcome = ex.wait()          # the next finished task, in completion order
            ...                          # may submit more tasks (e.g. pairs once a marginal is done)

or, for a fixed batch, ``for outcome in ex.map_unordered(fn, [(key, args), ...]): ...``.

- ``LocalExecutor()`` (``workers=1``) runs one task at a time, in submission order, in this process,
  when :meth:`~Executor.wait` is called: exactly what a plain loop would do (``max_in_flight == 1``).
- ``LocalExecutor(workers=N)``, N > 1, runs tasks in N worker processes on this machine, started with
  the ``spawn`` method (``remote``, ``max_in_flight == N + 1``). A task whose worker dies (killed,
  out of memory) is run again in a fresh worker, at most ``max_retries`` times; an exception raised
  by the task comes back in its outcome; :meth:`~Executor.cancel` terminates the busy workers.
- :class:`RayExecutor` joins a cluster (``address="auto"`` or ``"ray://host:10001"``) or starts a
  local Ray instance. Each task is a Ray task asking for its :class:`Resources`; a task whose worker
  dies is retried ``max_retries`` times; an exception raised by the task is not retried and comes
  back in its outcome.

In a worker process (pool or Ray) torch uses a fixed number of intra-op threads (the worker's CPU
share, at least 1) and deterministic algorithms, so a task computes the same numbers as in a
one-thread local process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import socket
import time
import traceback
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_for_any
from typing import Any

from flare_core.checks import check_int, check_number
from flare_core.errors import RemoteTraceback, WorkerDied

EXECUTORS = ("local", "ray")
LOCAL_OPTIONS = ("workers", "threads_per_worker", "max_retries")


@dataclass(frozen=True)
class Resources:
    """The share of a machine one task asks for: CPU cores and GPUs (fractions allowed)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            check_number(getattr(self, name), name, min_value=0, finite=False)


@dataclass
class Outcome:
    """A finished task: ``value`` when it returned, ``error`` (the exception) when it failed.

    ``worker`` names the process that ran it (``"hostname:pid"``) and ``seconds`` is the task's run
    time inside that process; either is None when unknown (a task that raised on Ray, or whose worker
    process died: ``seconds``).
    """

    key: Hashable
    value: Any = None
    error: BaseException | None = None
    worker: str | None = None
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(ABC):
    """Runs keyed tasks and returns their outcomes as they finish; see the module docstring.

    ``max_in_flight`` is how many tasks a caller should keep submitted at once (1 for the serial
    local executor, so that a caller's submission order is the order of the work). ``remote`` is True
    when tasks run in other processes or machines (the caller then resolves devices inside the task).
    """

    name: str = "executor"
    max_in_flight: int = 1
    remote: bool = False

    def put(self, value: Any) -> Any:
        """A handle to ``value`` that tasks receive as an argument (shared once, not copied per task)."""
        return value

    def submit(
        self,
        key: Hashable,
        fn: Callable[..., Any],
        args: tuple = (),
        resources: Resources | None = None,
    ) -> None:
        """Queue ``fn(*args)`` under ``key`` (unique among the tasks in flight)."""
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        _check_key(key, self._keys_in_flight())
        self._submit(key, fn, tuple(args), resources or Resources())

    @abstractmethod
    def _keys_in_flight(self) -> Iterable[Hashable]:
        """Keys of the tasks submitted and not yet returned by :meth:`wait`."""

    @abstractmethod
    def _submit(self, key: Hashable, fn: Callable[..., Any], args: tuple, resources: Resources) -> None:
        """Start or queue one validated task."""

    @abstractmethod
    def in_flight(self) -> int:
        """Number of submitted tasks whose outcome has not been returned by :meth:`wait` yet."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> Outcome | None:
        """The next finished task's outcome; None when ``timeout`` seconds pass first.

        Raises ValueError when nothing is in flight.
        """

    @abstractmethod
    def cancel(self) -> None:
        """Drop every task in flight (running ones are interrupted where the backend allows)."""

    def close(self) -> None:
        """Cancel what is in flight and release the backend."""
        self.cancel()

    def map_unordered(
        self,
        fn: Callable[..., Any],
        tasks: Iterable[tuple[Hashable, tuple]],
        resources: Resources | None = None,
    ) -> Iterator[Outcome]:
        """Run ``fn(*args)`` for each ``(key, args)`` in ``tasks``; yield outcomes in completion order.

        At most ``max_in_flight`` tasks are submitted at once. Stopping the iteration early cancels
        the tasks still in flight.
        """
        pending = iter(tasks)
        exhausted = False
        try:
            while True:
                while not exhausted and self.in_flight() < self.max_in_flight:
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    key, args = item
                    self.submit(key, fn, tuple(args), resources)
                if not self.in_flight():
                    return
                outcome = self.wait()
                if outcome is not None:
                    yield outcome
        finally:
            if self.in_flight():
                self.cancel()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_key(key: Hashable, taken: Iterable[Hashable]) -> None:
    try:
        hash(key)
    except TypeError as exc:
        raise ValueError(f"task keys must be hashable, got {key!r}") from exc
    if key in taken:
        raise ValueError(f"a task with key {key!r} is already in flight")


def _worker_id() -> str:
    """``"hostname:pid"`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _configure_torch(threads: int) -> None:
    """``threads`` torch intra-op threads (at least 1) and deterministic algorithms in this process."""
    import torch

    torch.set_num_threads(max(1, int(threads)))
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def _invoke(fn: Callable[..., Any], threads: int, *args: Any) -> tuple[Any, str, float]:
    """Run ``fn(*args)`` in a worker with ``threads`` torch threads and deterministic algorithms.

    Returns ``(value, worker, seconds)``: the task's value, :func:`_worker_id` and its run time.
    """
    _configure_torch(threads)
    start = time.perf_counter()
    value = fn(*args)
    return value, _worker_id(), time.perf_counter() - start


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
        self._pool: _ProcessPool | None = None
        if self.workers > 1:
            threads = self.threads_per_worker or max(1, (os.cpu_count() or 1) // self.workers)
            self._pool = _ProcessPool(self.workers, threads, self.max_retries)
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
            return Outcome(key, error=exc, worker=_worker_id(), seconds=time.perf_counter() - start)
        seconds = time.perf_counter() - start
        return Outcome(key, value=value, worker=_worker_id(), seconds=seconds)

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
    """A pool worker: receive ``pickle((fn, args))``, run it through :func:`_invoke`, send the outcome.

    Replies are ``("ok", value, worker, seconds)`` or ``("error", exception, traceback text, worker,
    seconds)``. The worker returns (and its process exits) when the parent closes the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops the workers
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        start = time.perf_counter()
        try:
            fn, args = pickle.loads(payload)  # imports fn's module the first time
            _configure_torch(threads)
            start = time.perf_counter()
            value, worker, seconds = _invoke(fn, threads, *args)
            reply = pickle.dumps(("ok", value, worker, seconds), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # the task's failure (or an unpicklable value) is its outcome
            seconds = time.perf_counter() - start
            error = ("error", _portable(exc), traceback.format_exc(), _worker_id(), seconds)
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


class _ProcessPool:
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


class RayExecutor(Executor):
    """Tasks as Ray tasks on a cluster (``address``) or on a local Ray instance (``address=None``).

    - ``address``: ``"auto"`` joins the cluster this machine belongs to (``ray start`` ran here),
      ``"ray://head:10001"`` connects a client; None starts a local instance with ``num_cpus`` /
      ``num_gpus`` (default: all of this machine). When Ray is already initialised in this process,
      that instance is used and left running on :meth:`close`.
    - ``max_retries``: how many times a task whose worker died (killed, out of memory, node lost)
      is run again. Exceptions raised by the task itself are not retried.
    - ``gpu_fraction``: multiplies each task's GPU request (0.25 packs four tasks per GPU).
    - ``threads_per_task``: torch intra-op threads inside a task (default: its CPU share, >= 1).
    - ``max_in_flight``: tasks a caller keeps submitted at once (default 10,000: all of them).
    - ``init_kwargs``: passed on to ``ray.init`` (e.g. ``runtime_env``).
    """

    name = "ray"
    remote = True

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        max_retries: int = 2,
        gpu_fraction: float = 1.0,
        threads_per_task: int | None = None,
        max_in_flight: int = 10_000,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ValueError("the ray executor needs the 'ray' package: pip install ray") from exc
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ValueError(f"address must be a non-empty string or None, got {address!r}")
        max_retries = check_int(max_retries, "max_retries", min_value=0)
        gpu_fraction = check_number(gpu_fraction, "gpu_fraction", min_value=0, max_value=1, include_min=False)
        threads_per_task = check_int(threads_per_task, "threads_per_task", min_value=1, allow_none=True)
        max_in_flight = check_int(max_in_flight, "max_in_flight", min_value=1)
        if address is not None and (num_cpus is not None or num_gpus is not None):
            raise ValueError("num_cpus / num_gpus size a local Ray instance; leave them out with an address")
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
            if address is None:
                kwargs.update(num_cpus=num_cpus, num_gpus=num_gpus)
            kwargs.update(init_kwargs or {})
            ray.init(address=address, **kwargs)
        self.max_retries = max_retries
        self.gpu_fraction = float(gpu_fraction)
        self.threads_per_task = threads_per_task
        self.max_in_flight = max_in_flight
        self._remote = ray.remote(_invoke)
        self._refs: dict[Any, Hashable] = {}

    def put(self, value: Any) -> Any:
        return self._ray.put(value)

    def _keys_in_flight(self) -> Iterable[Hashable]:
        return self._refs.values()

    def _submit(self, key: Hashable, fn: Callable[..., Any], args: tuple, res: Resources) -> None:
        threads = self.threads_per_task or max(1, int(res.num_cpus))
        ref = self._remote.options(
            num_cpus=res.num_cpus,
            num_gpus=res.num_gpus * self.gpu_fraction,
            max_retries=self.max_retries,
            retry_exceptions=False,
        ).remote(fn, threads, *args)
        self._refs[ref] = key

    def in_flight(self) -> int:
        return len(self._refs)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        if not self._refs:
            raise ValueError("no task in flight")
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        if not ready:
            return None
        ref = ready[0]
        key = self._refs.pop(ref)
        try:
            value, worker, seconds = self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:  # the task raised: hand back its exception
            cause = getattr(exc, "cause", None)
            return Outcome(key, error=cause if isinstance(cause, BaseException) else exc)
        except self._ray.exceptions.RayError as exc:  # worker died past its retries, cancelled, ...
            return Outcome(key, error=exc)
        return Outcome(key, value=value, worker=worker, seconds=seconds)

    def cancel(self) -> None:
        """Cancel the tasks in flight: a running one gets KeyboardInterrupt, its worker is kept."""
        for ref in list(self._refs):
            with contextlib.suppress(Exception):  # already finished or gone
                self._ray.cancel(ref, force=False)
        self._refs.clear()

    def close(self) -> None:
        self.cancel()
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False


def get_executor(name: str = "local", **kwargs: Any) -> Executor:
    """An executor by name: ``"local"`` (options ``workers``, ``threads_per_worker``, ``max_retries`` of
    :class:`LocalExecutor`) or ``"ray"`` (options of :class:`RayExecutor`)."""
    if name == "local":
        unknown = sorted(set(kwargs) - set(LOCAL_OPTIONS))
        if unknown:
            raise ValueError(
                f"unknown options {unknown} for the local executor: it takes {list(LOCAL_OPTIONS)}"
            )
        return LocalExecutor(**kwargs)
    if name == "ray":
        return RayExecutor(**kwargs)
    raise ValueError(f"unknown executor {name!r}: choose from {list(EXECUTORS)}")
