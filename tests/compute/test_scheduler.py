"""The one loop that runs units: dependency order, stored units, narrowed units, failures and stopping."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flare_core.compute import LocalExecutor, Outcome
from flare_core.compute.scheduler import Task, Unit, run_units
from flare_core.errors import Cancelled, DependencyFailed


@dataclass(frozen=True)
class Step(Unit):
    """A unit named ``name`` that requires the units named in ``after`` (not part of its identity)."""

    name: str
    after: tuple[str, ...] = field(default=(), compare=False)

    def requires(self) -> tuple[Unit, ...]:
        return tuple(Step(n) for n in self.after)


@dataclass(frozen=True)
class Batch(Unit):
    names: tuple[str, ...]


def _echo(name: str) -> str:
    return name


def _boom(name: str) -> str:
    raise ArithmeticError(f"{name} fails on purpose")


class Recorder:
    """A handler that runs each unit's name through ``_echo`` (or ``_boom`` for the names in ``fail``)."""

    def __init__(self, stored=(), fail=(), stop_after: int | None = None) -> None:
        self.stored, self.fail, self.stop_after = set(stored), set(fail), stop_after
        self.started: list[str] = []
        self.finished: list[tuple[str, str]] = []  # (unit, value or error type)
        self.resumed: list[str] = []

    def pending(self, unit: Unit) -> Unit | None:
        if isinstance(unit, Batch):
            todo = tuple(n for n in unit.names if n not in self.stored)
            self.resumed += [n for n in unit.names if n in self.stored]
            return Batch(todo) if todo else None
        if unit.name in self.stored:
            self.resumed.append(unit.name)
            return None
        return unit

    def task(self, unit: Unit) -> Task:
        name = ",".join(unit.names) if isinstance(unit, Batch) else unit.name
        self.started.append(name)
        return Task(_boom if name in self.fail else _echo, (name,))

    def finish(self, unit: Unit, outcome: Outcome) -> None:
        name = ",".join(unit.names) if isinstance(unit, Batch) else unit.name
        self.finished.append((name, outcome.value if outcome.ok else type(outcome.error).__name__))
        if isinstance(outcome.error, DependencyFailed):
            assert outcome.worker is None and outcome.seconds is None

    def check_stop(self) -> None:
        if self.stop_after is not None and len(self.finished) >= self.stop_after:
            raise Cancelled(f"stopped after {len(self.finished)}")


def test_released_units_go_before_free_ones_so_a_serial_run_is_a_nested_loop():
    units = [Step("m1"), Step("m2"), Step("p1", ("m1",)), Step("q1", ("m1",)), Step("p2", ("m2",))]
    handler = Recorder()
    run_units(LocalExecutor(), units, handler)
    assert handler.started == ["m1", "p1", "q1", "m2", "p2"]
    assert handler.finished == [(n, n) for n in ["m1", "p1", "q1", "m2", "p2"]]


def test_a_unit_waits_for_every_requirement():
    units = [Step("a"), Step("b"), Step("ab", ("a", "b"))]
    handler = Recorder()
    run_units(LocalExecutor(), units, handler)
    assert handler.started == ["a", "b", "ab"]


def test_stored_units_release_their_dependents_without_a_task():
    units = [Step("m"), Step("p", ("m",)), Step("q", ("m",))]
    handler = Recorder(stored={"m", "q"})
    run_units(LocalExecutor(), units, handler)
    assert handler.resumed == ["m", "q"] and handler.started == ["p"]
    assert handler.finished == [("p", "p")]


def test_pending_may_narrow_a_unit_and_the_outcome_names_the_narrowed_one():
    handler = Recorder(stored={"b"})
    run_units(LocalExecutor(), [Batch(("a", "b", "c")), Batch(("b",))], handler)
    assert handler.started == ["a,c"] and handler.finished == [("a,c", "a,c")]
    assert handler.resumed == ["b", "b"]


def test_a_failure_blocks_its_dependents_transitively_and_others_go_on():
    units = [Step("m1"), Step("m2"), Step("p1", ("m1",)), Step("pp1", ("p1",)), Step("p2", ("m2",))]
    handler = Recorder(fail={"m1"})
    run_units(LocalExecutor(), units, handler)
    assert handler.started == ["m1", "m2", "p2"]
    assert handler.finished == [
        ("m1", "ArithmeticError"),
        ("p1", "DependencyFailed"),
        ("pp1", "DependencyFailed"),
        ("m2", "m2"),
        ("p2", "p2"),
    ]


def test_the_dependency_failure_names_the_failed_unit_and_its_error():
    errors: list[BaseException] = []

    class Keep(Recorder):
        def finish(self, unit, outcome):
            if isinstance(outcome.error, DependencyFailed):
                errors.append(outcome.error)
            super().finish(unit, outcome)

    run_units(LocalExecutor(), [Step("m"), Step("p", ("m",))], Keep(fail={"m"}))
    (error,) = errors
    assert error.unit == Step("m") and isinstance(error.error, ArithmeticError)
    assert "m fails on purpose" in str(error)


def test_a_handler_that_raises_stops_the_plan_and_nothing_stays_in_flight():
    class Strict(Recorder):
        def finish(self, unit, outcome):
            super().finish(unit, outcome)
            if not outcome.ok:
                raise outcome.error

    ex = LocalExecutor()
    handler = Strict(fail={"b"})
    with pytest.raises(ArithmeticError, match="b fails on purpose"):
        run_units(ex, [Step("a"), Step("b"), Step("c")], handler)
    assert handler.started == ["a", "b"] and ex.in_flight() == 0


def test_check_stop_runs_before_each_task_and_cancels():
    ex = LocalExecutor()
    handler = Recorder(stop_after=2)
    with pytest.raises(Cancelled, match="stopped after 2"):
        run_units(ex, [Step(n) for n in "abcde"], handler)
    assert handler.started == ["a", "b"] and ex.in_flight() == 0


def test_a_plan_is_checked_before_anything_runs():
    handler = Recorder()
    with pytest.raises(ValueError, match="lists a unit twice"):
        run_units(LocalExecutor(), [Step("a"), Step("a")], handler)
    with pytest.raises(ValueError, match="requires units that are not in the plan"):
        run_units(LocalExecutor(), [Step("p", ("missing",))], handler)
    assert handler.started == []
