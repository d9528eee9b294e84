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

from typing import Any

from flare_core.compute.executor import Executor, Outcome, Resources
from flare_core.compute.local import LocalExecutor
from flare_core.compute.ray_cluster import RayExecutor

EXECUTORS = ("local", "ray")
LOCAL_OPTIONS = ("workers", "threads_per_worker", "max_retries")

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "Outcome", "RayExecutor", "Resources", "get_executor"]


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
