"""Tasks as Ray tasks, on a cluster or on a Ray instance started on this machine."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from flare_core.checks import check_int, check_number
from flare_core.compute.executor import Executor, Outcome, Resources, invoke


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
        self._remote = ray.remote(invoke)
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
