"""Where the units of a computation run: in this process (``local``) or on a Ray cluster (``ray``).

An :class:`Executor` runs independent tasks ``fn(*args)`` identified by a hashable key and hands back
each one's :class:`Outcome` (its value, or the exception it raised) as it finishes::

    with get_executor("ray", address="auto") as ex:
        ex.submit(("marginal", "b"), fit, (v_train, v_val), Resources(num_cpus=1))
        while ex.in_flight():
            outcome = ex.wait()          # the next finished task, in completion order
            ...                          # may submit more tasks (e.g. pairs once a marginal is done)

or, for a fixed batch, ``for outcome in ex.map_unordered(fn, [(key, args), ...]): ...``.

- :class:`LocalExecutor` runs one task at a time, in submission order, in this process, when
  :meth:`~Executor.wait` is called: exactly what a plain loop would do (``max_in_flight == 1``).
- :class:`RayExecutor` joins a cluster (``address="auto"`` or ``"ray://host:10001"``) or starts a
  local Ray instance. Each task is a Ray task asking for its :class:`Resources`; a task whose worker
  dies is retried ``max_retries`` times; an exception raised by the task is not retried and comes
  back in its outcome. Inside a task torch uses ``threads_per_task`` intra-op threads (default: the
  task's CPU share, at least 1) and deterministic algorithms, so a task computes the same numbers
  as in a one-thread local process.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Resources:
    """The share of a machine one task asks for: CPU cores and GPUs (fractions allowed)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


@dataclass
class Outcome:
    """A finished task: ``value`` when it returned, ``error`` (the exception) when it failed."""

    key: Hashable
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Executor(ABC):
    """Runs keyed tasks and returns their outcomes as they finish; see the module docstring.

    ``max_in_flight`` is how many tasks a caller should keep submitted at once (1 for the local
    executor, so that a caller's submission order is the order of the work). ``remote`` is True when
    tasks run in other processes or machines (the caller then resolves devices inside the task).
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


class LocalExecutor(Executor):
    """Serial, in-process, deterministic: each task runs inside :meth:`wait`, oldest first.

    Exceptions (``Exception`` subclasses) raised by a task come back in its :class:`Outcome`;
    ``KeyboardInterrupt`` and ``SystemExit`` propagate.
    """

    name = "local"
    max_in_flight = 1
    remote = False

    def __init__(self) -> None:
        self._queue: deque[tuple[Hashable, Callable[..., Any], tuple]] = deque()

    def _keys_in_flight(self) -> Iterable[Hashable]:
        return (k for k, _, _ in self._queue)

    def _submit(self, key: Hashable, fn: Callable[..., Any], args: tuple, resources: Resources) -> None:
        self._queue.append((key, fn, args))

    def in_flight(self) -> int:
        return len(self._queue)

    def wait(self, timeout: float | None = None) -> Outcome | None:
        if not self._queue:
            raise ValueError("no task in flight")
        key, fn, args = self._queue.popleft()
        try:
            return Outcome(key, value=fn(*args))
        except Exception as exc:  # the task's failure is its outcome
            return Outcome(key, error=exc)

    def cancel(self) -> None:
        self._queue.clear()


def _invoke(fn: Callable[..., Any], threads: int, *args: Any) -> Any:
    """Run ``fn(*args)`` in a Ray worker with ``threads`` torch threads and deterministic algorithms."""
    import torch

    torch.set_num_threads(max(1, int(threads)))
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return fn(*args)


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
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not (isinstance(gpu_fraction, int | float) and 0 < gpu_fraction <= 1):
            raise ValueError(f"gpu_fraction must be in (0, 1], got {gpu_fraction!r}")
        if threads_per_task is not None and (not isinstance(threads_per_task, int) or threads_per_task < 1):
            raise ValueError(f"threads_per_task must be a positive integer or None, got {threads_per_task!r}")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
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
            return Outcome(key, value=self._ray.get(ref))
        except self._ray.exceptions.RayTaskError as exc:  # the task raised: hand back its exception
            cause = getattr(exc, "cause", None)
            return Outcome(key, error=cause if isinstance(cause, BaseException) else exc)
        except self._ray.exceptions.RayError as exc:  # worker died past its retries, cancelled, ...
            return Outcome(key, error=exc)

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
    """An executor by name: ``"local"`` (no options) or ``"ray"`` (options of :class:`RayExecutor`)."""
    if name == "local":
        if kwargs:
            raise ValueError(f"the local executor takes no options, got {sorted(kwargs)}")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(**kwargs)
    raise ValueError(f"unknown executor {name!r}: choose from {list(EXECUTORS)}")
