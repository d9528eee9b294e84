"""Units of work with explicit dependencies, and the one loop that runs them on an executor.

A :class:`Unit` is a frozen dataclass naming one piece of work (``EmbedUnit("glove-6b-50d")``,
``MarginalUnit("b")``, ``ConditionalUnit("a", "b")``…); :meth:`Unit.requires` lists the units it waits
for. :func:`run_units` is the only submit/wait/cancel loop of the package: it starts units in plan order
as soon as what they require is done, keeps ``executor.max_in_flight`` tasks submitted, hands each
outcome to the caller's :class:`UnitHandler` as it comes in, and cancels whatever is still in flight
when it stops (the plan is done, a handler raised, or the caller asked to stop)::

    handler = MyHandler(...)                     # pending(), task(), finish(), check_stop()
    run_units(executor, [MarginalUnit("b"), ConditionalUnit("a", "b")], handler)

Units released by a finished dependency go before the units that wait for nothing, so with a serial
executor the order is that of a plain nested loop (a target's marginal, then its pairs, then the next
target). A unit whose dependency failed is not run: the handler's :meth:`~UnitHandler.finish` receives
it with a :class:`~flare_core.errors.DependencyFailed` error, once, right after the failure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from flare_core.compute.executor import Executor, Outcome, Resources
from flare_core.errors import DependencyFailed


@dataclass(frozen=True)
class Unit:
    """One piece of work; subclasses add the fields that name it. A unit is its own task key."""

    def requires(self) -> tuple[Unit, ...]:
        """The units that must finish (successfully) before this one starts."""
        return ()


@dataclass(frozen=True)
class Task:
    """What a unit runs on the executor: ``fn(*args)``, asking for ``resources``."""

    fn: Callable[..., Any]
    args: tuple = ()
    resources: Resources = field(default_factory=Resources)


class UnitHandler(Protocol):
    """The caller's side of :func:`run_units`: what a unit needs, what its result means, when to stop."""

    def pending(self, unit: Unit) -> Unit | None:
        """The part of ``unit`` still to compute: ``unit`` itself, a smaller unit, or None when stored
        results hold all of it (the handler records them as it would a finished task)."""

    def task(self, unit: Unit) -> Task:
        """The task that computes ``unit`` (a value :meth:`pending` returned)."""

    def finish(self, unit: Unit, outcome: Outcome) -> None:
        """Record the outcome of ``unit``'s task; raise to stop the whole plan."""

    def check_stop(self) -> None:
        """Raise :class:`~flare_core.errors.Cancelled` when the caller asked to stop."""


def run_units(
    executor: Executor, units: Sequence[Unit], handler: UnitHandler, *, poll: float | None = None
) -> None:
    """Run every unit of ``units`` on ``executor``, each once its requirements are done.

    ``poll``: seconds between :meth:`UnitHandler.check_stop` calls while tasks run elsewhere (None waits
    for each outcome). Requirements must be units of ``units``. Whatever is still in flight when this
    returns or raises is cancelled; the executor stays open (its owner closes it).
    """
    plan = _Plan(units)
    running: dict[Unit, Unit] = {}  # submitted (possibly narrowed) unit -> the unit of the plan
    try:
        while True:
            while executor.in_flight() < executor.max_in_flight and plan.has_next():
                unit = plan.next()
                part = handler.pending(unit)
                if part is None:
                    plan.done(unit)
                    continue
                handler.check_stop()
                task = handler.task(part)
                running[part] = unit
                executor.submit(part, task.fn, task.args, task.resources)
            if not executor.in_flight():
                break
            outcome = executor.wait(timeout=poll)
            if outcome is None:  # tasks still running elsewhere: a stop request cancels them now
                handler.check_stop()
                continue
            unit = running.pop(outcome.key)
            handler.finish(outcome.key, outcome)
            if outcome.ok:
                plan.done(unit)
            else:
                _fail_dependents(plan, unit, outcome.error, handler)
            if executor.in_flight():
                handler.check_stop()
    finally:
        if executor.in_flight():
            executor.cancel()


def _fail_dependents(plan: _Plan, unit: Unit, error: BaseException | None, handler: UnitHandler) -> None:
    """Every unit that (transitively) requires ``unit`` fails with :class:`DependencyFailed`, in plan
    order."""
    for dependent in plan.blocked_by(unit):
        failure = DependencyFailed(unit, error if error is not None else RuntimeError("failed"))
        handler.finish(dependent, Outcome(dependent, error=failure))


class _Plan:
    """The units of a plan in order, what each still waits for, and which are ready to start."""

    def __init__(self, units: Iterable[Unit]) -> None:
        self.units = list(units)
        if len(set(self.units)) != len(self.units):
            raise ValueError("a plan lists a unit twice")
        known = set(self.units)
        self.waiting: dict[Unit, set[Unit]] = {}
        self.dependents: dict[Unit, list[Unit]] = {u: [] for u in self.units}
        for unit in self.units:
            needs = set(unit.requires())
            missing = needs - known
            if missing:
                raise ValueError(
                    f"{unit!r} requires units that are not in the plan: {sorted(map(repr, missing))}"
                )
            self.waiting[unit] = needs
            for need in unit.requires():
                self.dependents[need].append(unit)
        self.initial = deque(u for u in self.units if not self.waiting[u])
        self.released: deque[Unit] = deque()

    def has_next(self) -> bool:
        return bool(self.released or self.initial)

    def next(self) -> Unit:
        """The next unit to start: one released by a finished dependency first, else the next free one."""
        return self.released.popleft() if self.released else self.initial.popleft()

    def done(self, unit: Unit) -> None:
        """``unit`` finished: its dependents that wait for nothing else become ready, in plan order."""
        for dependent in self.dependents[unit]:
            self.waiting[dependent].discard(unit)
            if not self.waiting[dependent]:
                self.released.append(dependent)

    def blocked_by(self, unit: Unit) -> list[Unit]:
        """The units that can no longer run because ``unit`` failed (transitively), in plan order."""
        blocked: list[Unit] = []
        stack = list(reversed(self.dependents[unit]))
        seen: set[Unit] = set()
        while stack:
            dependent = stack.pop()
            if dependent in seen:
                continue
            seen.add(dependent)
            blocked.append(dependent)
            stack.extend(reversed(self.dependents[dependent]))
        order = {u: i for i, u in enumerate(self.units)}
        return sorted(blocked, key=order.__getitem__)
