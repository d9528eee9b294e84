"""The executor interface: tasks ``fn(*args)`` identified by a key, and the outcome of each.

An :class:`Executor` runs independent tasks and hands back each one's :class:`Outcome` (its value or
the exception it raised, the worker that ran it and how long the task took there) as it finishes.
Callers do not drive executors themselves: :func:`flare_core.compute.scheduler.run_units` is the one
loop that submits, waits and cancels. The implementations are :class:`~flare_core.compute.local.LocalExecutor`
(this process, or a pool of worker processes) and :class:`~flare_core.compute.ray_cluster.RayExecutor`.

In a worker process (pool or Ray) torch uses a fixed number of intra-op threads (the worker's CPU
share, at least 1) and deterministic algorithms, so a task computes the same numbers as in a
one-thread local process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from flare_core.checks import check_number


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


#: What the dashboard's server holds in its environment that no worker process may have: the owner's
#: credential (``flare app`` on an address others can reach). A worker runs model code and user data.
SERVER_SECRETS = ("FLARE_OWNER_TOKEN",)


def worker_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment to start a worker process with: ``environ`` (default: this process's) without
    :data:`SERVER_SECRETS`."""
    source = os.environ if environ is None else environ
    if not isinstance(source, Mapping):
        raise ValueError(f"environ must be a mapping of names to values, got {type(source).__name__}")
    return {name: value for name, value in source.items() if name not in SERVER_SECRETS}


def forget_server_secrets() -> None:
    """Remove :data:`SERVER_SECRETS` from this process's environment: only in a process that is a worker
    and nothing else (a pool worker, a run's worker), never in the dashboard's server, which reads them."""
    for name in SERVER_SECRETS:
        os.environ.pop(name, None)


def worker_id() -> str:
    """``"hostname:pid"`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def configure_torch(threads: int) -> None:
    """``threads`` torch intra-op threads (at least 1) and deterministic algorithms in this process."""
    import torch

    torch.set_num_threads(max(1, int(threads)))
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """``threads`` torch intra-op threads in this process inside the block, the previous count after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def invoke(fn: Callable[..., Any], threads: int, *args: Any) -> tuple[Any, str, float]:
    """Run ``fn(*args)`` in a worker with ``threads`` torch threads and deterministic algorithms.

    Returns ``(value, worker, seconds)``: the task's value, :func:`worker_id` and its run time.
    """
    configure_torch(threads)
    start = time.perf_counter()
    value = fn(*args)
    return value, worker_id(), time.perf_counter() - start
