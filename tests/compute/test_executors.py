"""Executors: serial local, the local process pool and Ray give the same IS matrix; failures are reported;
killed workers are retried; cancel and close stop the worker processes."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from flare_core.analyses.sufficiency import (
    FlowConfig,
    GMMConfig,
    SufficiencyResult,
    sufficiency_matrix,
)
from flare_core.analyses.sufficiency import gmm as gmm_module
from flare_core.analyses.sufficiency.result import FAILED_COLUMNS, RECORD_COLUMNS
from flare_core.analyses.sufficiency.units import ConditionalUnit
from flare_core.compute import Executor, LocalExecutor, Outcome, Resources, get_executor
from flare_core.compute.scheduler import Task, Unit, run_units
from flare_core.errors import Cancelled

TINY_FLOW = FlowConfig(
    n_transforms=1, hidden_features=16, rank=4, max_epochs=4, max_epochs_conditional=4, patience=2
)
QUICK_GMM = GMMConfig(max_epochs=3, max_epochs_conditional=3)
NUMERIC = [c for c in RECORD_COLUMNS if c not in ("source", "target", "seconds")]


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Ray tasks use one torch thread; the local reference must too for bit-identical numbers."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _pool(n: int = 300, seed: int = 0) -> dict[str, np.ndarray]:
    """Three related embeddings (n, 8), (n, 6), (n, 12) of a common 4-d latent."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    return {
        "a": z @ rng.standard_normal((4, 8)) + 0.3 * rng.standard_normal((n, 8)),
        "b": np.tanh(z @ rng.standard_normal((4, 6))) + 0.2 * rng.standard_normal((n, 6)),
        "c": (z[:, :2] @ rng.standard_normal((2, 12))) ** 2 + 0.5 * rng.standard_normal((n, 12)),
    }


def _assert_same_numbers(a: SufficiencyResult, b: SufficiencyResult, skip: set | None = None) -> None:
    skip = skip or set()
    pd.testing.assert_frame_equal(a.marginals.drop(columns="seconds"), b.marginals.drop(columns="seconds"))
    keep_a = [(s, t) not in skip for s, t in zip(a.records["source"], a.records["target"], strict=True)]
    keep_b = [(s, t) not in skip for s, t in zip(b.records["source"], b.records["target"], strict=True)]
    pd.testing.assert_frame_equal(
        a.records.loc[keep_a, NUMERIC].reset_index(drop=True),
        b.records.loc[keep_b, NUMERIC].reset_index(drop=True),
        check_exact=True,
    )
    for key in a.val_logp_marg:
        np.testing.assert_array_equal(a.val_logp_marg[key], b.val_logp_marg[key])
    for key in a.val_logp_cond:
        if key not in skip:
            np.testing.assert_array_equal(a.val_logp_cond[key], b.val_logp_cond[key])
    matrix_a, matrix_b = a.is_matrix.copy(), b.is_matrix.copy()
    for s, t in skip:
        matrix_a.loc[s, t] = matrix_b.loc[s, t] = np.nan
    pd.testing.assert_frame_equal(matrix_a, matrix_b, check_exact=True)


def _square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative {x}")
    return x * x


# ---------------------------------------------------------------- local executor and the matrix


@dataclasses.dataclass(frozen=True)
class _Call(Unit):
    """Call a function on ``x`` (``index`` keeps equal arguments apart)."""

    index: int
    x: int


class _Collect:
    """Runs every :class:`_Call` with ``fn`` and keeps the outcomes in the order they came."""

    def __init__(self, fn: Callable[[int], Any]) -> None:
        self.fn, self.outcomes = fn, []

    def pending(self, unit: _Call) -> _Call:
        return unit

    def task(self, unit: _Call) -> Task:
        return Task(self.fn, (unit.x,))

    def finish(self, unit: _Call, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def check_stop(self) -> None:
        return None


def _run_all(executor: Executor, fn: Callable[[int], Any], xs: list[int]) -> list[Outcome]:
    handler = _Collect(fn)
    run_units(executor, [_Call(i, x) for i, x in enumerate(xs)], handler)
    return handler.outcomes


def test_local_executor_runs_in_submission_order_and_reports_errors():
    calls: list[int] = []

    def task(x: int) -> int:
        calls.append(x)
        return _square(x)

    outcomes = _run_all(LocalExecutor(), task, [3, -1, 2])
    assert calls == [3, -1, 2]
    assert [o.key for o in outcomes] == [_Call(0, 3), _Call(1, -1), _Call(2, 2)]
    assert [o.value for o in outcomes] == [9, None, 4]
    assert isinstance(outcomes[1].error, ValueError) and not outcomes[1].ok
    here = f"{socket.gethostname()}:{os.getpid()}"
    assert all(o.worker == here and o.seconds is not None and o.seconds >= 0 for o in outcomes)


def test_executor_validation():
    ex = get_executor("local")
    ex.submit("k", _square, (1,))
    with pytest.raises(ValueError, match="already in flight"):
        ex.submit("k", _square, (2,))
    assert ex.in_flight() == 1
    ex.cancel()
    with pytest.raises(ValueError, match="no task in flight"):
        ex.wait()
    with pytest.raises(ValueError, match="unknown executor"):
        get_executor("dask")
    with pytest.raises(ValueError, match=r"unknown options \['address'\]"):
        get_executor("local", address="auto")
    with pytest.raises(ValueError, match="num_gpus"):
        Resources(num_gpus=-1)
    with pytest.raises(ValueError, match="executor"):
        sufficiency_matrix(_pool(60), executor=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_error"):
        sufficiency_matrix(_pool(60), on_error="ignore")


def test_explicit_local_executor_matches_default():
    cfg = QUICK_GMM
    default = sufficiency_matrix(_pool(), estimator="gmm", config=cfg, device="cpu")
    explicit = sufficiency_matrix(
        _pool(), estimator="gmm", config=cfg, device="cpu", executor=LocalExecutor()
    )
    _assert_same_numbers(default, explicit)
    assert default.failed.empty and default.failed_pairs == []


def test_local_failures_raise_by_default_and_continue_on_request(monkeypatch, tmp_path):
    cfg = QUICK_GMM
    fresh = sufficiency_matrix(_pool(), estimator="gmm", config=cfg, device="cpu")
    original = gmm_module._fit_conditional

    def flaky(u_train, *args, **kwargs):
        if u_train.shape[1] == 6:  # every pair whose source is "b"
            raise RuntimeError("diverged on purpose")
        return original(u_train, *args, **kwargs)

    monkeypatch.setattr(gmm_module, "_fit_conditional", flaky)
    with pytest.raises(RuntimeError, match="on purpose"):
        sufficiency_matrix(_pool(), estimator="gmm", config=cfg, device="cpu")

    events: list[dict] = []
    result = sufficiency_matrix(
        _pool(),
        estimator="gmm",
        config=cfg,
        device="cpu",
        on_error="continue",
        store_dir=tmp_path,
        progress=events.append,
    )
    bad = {("b", "a"), ("b", "c")}
    assert set(result.failed_pairs) == bad
    assert list(result.failed.columns) == FAILED_COLUMNS
    assert all(result.failed["error"].str.startswith("RuntimeError: diverged"))
    assert [e["done"] for e in events] == list(range(1, 10))
    assert sum("error" in e for e in events) == 2
    assert np.isnan(result.is_matrix.loc["b", "a"]) and np.isnan(result.is_matrix.loc["b", "c"])
    _assert_same_numbers(fresh, result, skip=bad)

    result.save(tmp_path / "res")
    assert SufficiencyResult.load(tmp_path / "res").failed_pairs == result.failed_pairs

    # the failed pairs were not stored: a resume computes only them
    monkeypatch.setattr(gmm_module, "_fit_conditional", original)
    events = []
    resumed = sufficiency_matrix(
        _pool(), estimator="gmm", config=cfg, device="cpu", store_dir=tmp_path, progress=events.append
    )
    assert sum(not e["resumed"] for e in events) == 2
    _assert_same_numbers(fresh, resumed)


def test_failed_marginal_fails_its_pairs(monkeypatch):
    original = gmm_module._fit_marginal

    def flaky(v_train, *args, **kwargs):
        if v_train.shape[1] == 12:
            raise FloatingPointError("no marginal for c")
        return original(v_train, *args, **kwargs)

    monkeypatch.setattr(gmm_module, "_fit_marginal", flaky)
    result = sufficiency_matrix(_pool(), estimator="gmm", config=QUICK_GMM, device="cpu", on_error="continue")
    assert set(result.failed_pairs) == {("a", "c"), ("b", "c")}
    assert list(result.failed["stage"]).count("marginal") == 1
    assert "c" not in result.val_logp_marg and len(result.records) == 4
    assert result.is_matrix["c"].isna().all()


# ---------------------------------------------------------------- Ray (a local instance, 2 CPUs)


def _killed_once(marker: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Kill this worker process the first time (no marker yet); run ``fn(*args)`` on the retry."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return fn(*args)


def _raises(*args: Any) -> Any:
    raise ArithmeticError("this pair fails on purpose")


class _Faults(Executor):
    """Wraps an executor; the tasks named in ``faults`` run ``wrapper(*extra, fn, *args)`` instead."""

    def __init__(self, inner: Executor, faults: dict[Hashable, tuple[Callable[..., Any], tuple]]) -> None:
        self.inner, self.faults = inner, faults
        self.remote, self.max_in_flight, self.name = inner.remote, inner.max_in_flight, inner.name

    def put(self, value: Any) -> Any:
        return self.inner.put(value)

    def _keys_in_flight(self):
        return self.inner._keys_in_flight()

    def _submit(self, key, fn, args, resources) -> None:
        if key in self.faults:
            wrapper, extra = self.faults[key]
            fn, args = wrapper, (*extra, fn, *args)
        self.inner.submit(key, fn, args, resources)

    def in_flight(self) -> int:
        return self.inner.in_flight()

    def wait(self, timeout: float | None = None) -> Outcome | None:
        return self.inner.wait(timeout)

    def cancel(self) -> None:
        self.inner.cancel()

    def close(self) -> None:
        self.cancel()


@pytest.fixture(scope="module")
def ray_executor():
    ray = pytest.importorskip("ray")
    from flare_core.compute import RayExecutor

    if ray.is_initialized():
        ray.shutdown()
    ex = RayExecutor(num_cpus=2, max_retries=2, init_kwargs={"logging_level": "ERROR"})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ex
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    ex.close()
    assert not ray.is_initialized()


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator,config",
    [
        ("gmm", QUICK_GMM),
        ("flow", TINY_FLOW),
        ("flow", dataclasses.replace(TINY_FLOW, batch_conditionals=2)),  # arrays nested in a group task
        ("flow", dataclasses.replace(TINY_FLOW, batch_conditionals=2, batch_targets=3)),  # and in a batch
    ],
    ids=["gmm", "flow", "flow-batched", "flow-all-targets"],
)
def test_ray_matrix_equals_local_matrix(ray_executor, tmp_path, estimator, config):
    pool = _pool()
    local = sufficiency_matrix(pool, estimator=estimator, config=config, device="cpu", seed=3)
    events: list[dict] = []
    remote = sufficiency_matrix(
        pool,
        estimator=estimator,
        config=config,
        device="cpu",
        seed=3,
        executor=ray_executor,
        store_dir=tmp_path,
        progress=events.append,
    )
    _assert_same_numbers(local, remote)
    assert remote.failed.empty
    assert sorted(e["done"] for e in events) == list(range(1, 10))
    stages = [(e["stage"], e["target"]) for e in events]
    for target in pool:  # every pair is reported after its target's marginal
        first = stages.index(("marginal", target))
        assert all(i > first for i, s in enumerate(stages) if s == ("conditional", target))
    assert len(list((tmp_path / "pairs").glob("*.json"))) == 6
    # and the store the Ray run wrote resumes in-process to the same numbers
    resumed = sufficiency_matrix(
        pool, estimator=estimator, config=config, device="cpu", seed=3, store_dir=tmp_path
    )
    _assert_same_numbers(local, resumed)


@pytest.mark.slow
def test_ray_reports_a_raising_task_and_retries_a_killed_worker(ray_executor, tmp_path):
    pool, cfg = _pool(), QUICK_GMM
    local = sufficiency_matrix(pool, estimator="gmm", config=cfg, device="cpu")
    marker = tmp_path / "killed-once"
    faulty = _Faults(
        ray_executor,
        {
            ConditionalUnit("a", "b"): (_killed_once, (str(marker),)),
            ConditionalUnit("c", "a"): (_raises, ()),
        },
    )
    events: list[dict] = []
    result = sufficiency_matrix(
        pool, estimator="gmm", config=cfg, device="cpu", executor=faulty, progress=events.append
    )
    assert marker.exists()  # the first attempt of (a, b) died with its worker and was run again
    assert result.failed_pairs == [("c", "a")]
    assert result.failed["error"].iloc[0] == "ArithmeticError: this pair fails on purpose"
    assert [e.get("error") is not None for e in events].count(True) == 1
    assert len(events) == 9
    _assert_same_numbers(local, result, skip={("c", "a")})


@pytest.mark.slow
def test_ray_cancel_then_resume(ray_executor, tmp_path):
    _check_cancel_then_resume(ray_executor, tmp_path)


@pytest.mark.slow
def test_ray_executor_runs_units(ray_executor):
    outcomes = {o.key.x: o for o in _run_all(ray_executor, _square, [-2, 3, 4])}
    assert outcomes[3].value == 9 and outcomes[4].value == 16
    assert isinstance(outcomes[-2].error, ValueError) and "negative -2" in str(outcomes[-2].error)
    assert ray_executor.in_flight() == 0
    for key in (3, 4):  # the Ray worker that ran the task, and the task's time there
        assert _pid(outcomes[key].worker) != os.getpid() and outcomes[key].seconds >= 0


# ---------------------------------------------------------------- local process pool (2 spawned workers)
#
# A spawned worker rebuilds each task's function by importing its module by name: the helpers below are
# module-level functions of ``tests.compute.test_executors``, importable in the workers because pytest puts the
# repository root on ``sys.path`` (``pythonpath = ["."]``) and spawn passes ``sys.path`` on to them.

_SERIAL: dict[tuple[str, str, int], SufficiencyResult] = {}


def _serial(estimator: str, config: FlowConfig | GMMConfig, seed: int = 0) -> SufficiencyResult:
    """The in-process, one-thread matrix of ``_pool()`` (computed once per test session)."""
    key = (estimator, repr(config), seed)
    if key not in _SERIAL:
        assert torch.get_num_threads() == 1
        _SERIAL[key] = sufficiency_matrix(
            _pool(), estimator=estimator, config=config, device="cpu", seed=seed
        )
    return _SERIAL[key]


def _check_cancel_then_resume(executor: Executor, tmp_path: Path) -> None:
    """A matrix on ``executor`` cancelled after 4 units keeps what finished; resumed on ``executor``, it
    reuses those units and ends with the serial run's numbers."""
    events: list[dict] = []
    options = dict(estimator="gmm", config=QUICK_GMM, device="cpu", executor=executor, store_dir=tmp_path)
    with pytest.raises(Cancelled):
        sufficiency_matrix(_pool(), progress=events.append, should_stop=lambda: len(events) >= 4, **options)
    assert executor.in_flight() == 0
    stored = len(list(tmp_path.glob("*/*.json")))
    assert stored == len(events) >= 4
    events = []
    resumed = sufficiency_matrix(_pool(), progress=events.append, **options)
    assert sum(e["resumed"] for e in events) == stored
    _assert_same_numbers(_serial("gmm", QUICK_GMM), resumed)


def _pid(worker: str | None) -> int:
    assert worker is not None and worker.startswith(f"{socket.gethostname()}:"), worker
    return int(worker.rsplit(":", 1)[1])


def _sleep_then(seconds: float, value: Any) -> Any:
    time.sleep(seconds)
    return value


def _sigkilled_once(marker: str, fn: Callable[..., Any], *args: Any) -> Any:
    """SIGKILL this worker process the first time (no marker yet); run ``fn(*args)`` on the retry."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return fn(*args)


def _sigkilled_always(attempts_dir: str, *task: Any) -> None:
    """Leave one file per attempt in ``attempts_dir``, then SIGKILL this worker (``task`` never runs)."""
    Path(attempts_dir, f"attempt-{os.getpid()}").touch()
    os.kill(os.getpid(), signal.SIGKILL)


def _announce_then_sleep(folder: str, name: str, seconds: float) -> None:
    """Write this worker's pid to ``folder/name`` once started, then sleep ``seconds``."""
    Path(folder, f"{name}.tmp").write_text(str(os.getpid()))
    os.replace(Path(folder, f"{name}.tmp"), Path(folder, name))
    time.sleep(seconds)


def _children() -> dict[int, str]:
    """pid -> command line of every live child process of this one (Linux /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def process_pool():
    """One pool for the tests below (they run in file order; the last one cancels and closes it, and
    a closed pool starts new workers when given a task, so any order works, only slower)."""
    ex = LocalExecutor(workers=2, threads_per_worker=1, max_retries=1)
    yield ex
    ex.close()


def test_local_executor_arguments():
    serial = LocalExecutor()
    assert (serial.workers, serial.remote, serial.max_in_flight) == (1, False, 1)
    assert isinstance(get_executor("local", workers=1), LocalExecutor)
    pool = get_executor("local", workers=3, threads_per_worker=2, max_retries=0)
    assert isinstance(pool, LocalExecutor) and pool.remote and pool.max_in_flight == 4
    assert (pool.workers, pool.threads_per_worker, pool.max_retries) == (3, 2, 0)
    pool.close()
    for kwargs, match in [
        ({"workers": 0}, "workers must be a positive integer"),
        ({"workers": -2}, "workers must be a positive integer"),
        ({"workers": True}, "workers must be a positive integer"),
        ({"workers": 2.0}, "workers must be a positive integer"),
        ({"workers": "2"}, "workers must be a positive integer"),
        ({"workers": None}, "workers must be a positive integer"),
        ({"threads_per_worker": 0}, "threads_per_worker must be a positive integer or None"),
        ({"threads_per_worker": False}, "threads_per_worker must be a positive integer or None"),
        ({"threads_per_worker": 1.5}, "threads_per_worker must be a positive integer or None"),
        ({"max_retries": -1}, "max_retries must be an integer >= 0"),
        ({"max_retries": True}, "max_retries must be an integer >= 0"),
        ({"max_retries": None}, "max_retries must be an integer >= 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            LocalExecutor(**kwargs)
        with pytest.raises(ValueError, match=match):
            get_executor("local", **kwargs)
    with pytest.raises(ValueError, match=r"unknown options \['threads'\]"):
        get_executor("local", workers=2, threads=2)
    with pytest.raises(TypeError):
        LocalExecutor(2, 1)  # type: ignore[misc]  # threads_per_worker is keyword-only


def test_process_pool_refuses_tasks_it_cannot_send():
    ex = LocalExecutor(workers=2)
    with pytest.raises(ValueError, match="cannot be sent to a worker process"):
        ex.submit("lambda", lambda: 1)
    with pytest.raises(ValueError, match="cannot be sent to a worker process"):
        ex.submit("args", _square, (lambda: 1,))
    assert ex.in_flight() == 0
    with pytest.raises(ValueError, match="no task in flight"):
        ex.wait(timeout=0)
    ex.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator,config",
    [
        ("gmm", QUICK_GMM),
        ("flow", TINY_FLOW),
        ("flow", dataclasses.replace(TINY_FLOW, batch_conditionals=2, batch_targets=3)),
    ],
    ids=["gmm", "flow", "flow-all-targets"],
)
def test_process_pool_matrix_equals_serial_matrix(process_pool, tmp_path, estimator, config):
    serial = _serial(estimator, config, seed=3)
    events: list[dict] = []
    pooled = sufficiency_matrix(
        _pool(),
        estimator=estimator,
        config=config,
        device="cpu",
        seed=3,
        executor=process_pool,
        store_dir=tmp_path,
        progress=events.append,
    )
    _assert_same_numbers(serial, pooled)
    assert pooled.failed.empty and process_pool.in_flight() == 0
    assert sorted(e["done"] for e in events) == list(range(1, 10))
    stages = [(e["stage"], e["target"]) for e in events]
    for target in ("a", "b", "c"):  # every pair is reported after its target's marginal
        first = stages.index(("marginal", target))
        assert all(i > first for i, s in enumerate(stages) if s == ("conditional", target))
    resumed = sufficiency_matrix(
        _pool(), estimator=estimator, config=config, device="cpu", seed=3, store_dir=tmp_path
    )
    _assert_same_numbers(serial, resumed)


@pytest.mark.slow
def test_process_pool_outcomes_name_their_worker_time_and_error(process_pool):
    tasks = [(("sleep", i), (_sleep_then, (0.3, i))) for i in range(4)]
    tasks += [("square", (_square, (3,))), ("raises", (_square, (-1,)))]
    for key, (fn, args) in tasks:
        process_pool.submit(key, fn, args)
    outcomes = {}
    while process_pool.in_flight():
        outcome = process_pool.wait()
        outcomes[outcome.key] = outcome
    assert [outcomes[("sleep", i)].value for i in range(4)] == [0, 1, 2, 3]
    assert all(0.3 <= outcomes[("sleep", i)].seconds < 5 for i in range(4))
    pids = {_pid(o.worker) for o in outcomes.values()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert outcomes["square"].value == 9 and outcomes["square"].seconds >= 0
    raised = outcomes["raises"]
    assert isinstance(raised.error, ValueError) and str(raised.error) == "negative -1" and not raised.ok
    assert "in _square" in str(raised.error.__cause__)  # the worker's traceback
    assert _pid(raised.worker) in pids and raised.seconds >= 0


@pytest.mark.slow
def test_process_pool_matrix_with_raising_and_killed_tasks(process_pool, tmp_path):
    marker, attempts = tmp_path / "killed-once", tmp_path / "attempts"
    attempts.mkdir()
    faulty = _Faults(
        process_pool,
        {
            ConditionalUnit("a", "b"): (_sigkilled_once, (str(marker),)),
            ConditionalUnit("b", "c"): (_sigkilled_always, (str(attempts),)),
            ConditionalUnit("c", "a"): (_raises, ()),
        },
    )
    events: list[dict] = []
    result = sufficiency_matrix(
        _pool(),
        estimator="gmm",
        config=QUICK_GMM,
        device="cpu",
        seed=3,
        executor=faulty,
        progress=events.append,
    )
    assert marker.exists()  # the first attempt of (a, b) died with its worker and was run again
    assert len(list(attempts.iterdir())) == 2  # (b, c) killed its worker on the first run and the retry
    assert sorted(result.failed_pairs) == [("b", "c"), ("c", "a")]  # remote: on_error is "continue"
    errors = {(row.source, row.target): row.error for row in result.failed.itertuples()}
    assert errors[("c", "a")] == "ArithmeticError: this pair fails on purpose"
    assert errors[("b", "c")] == (
        "WorkerDied: the worker process running task ConditionalUnit(source='b', target='c') died (killed by SIGKILL) "
        "on each of its 2 attempts (max_retries=1)"
    )
    assert len(events) == 9 and sum("error" in e for e in events) == 2
    _assert_same_numbers(_serial("gmm", QUICK_GMM, seed=3), result, skip={("b", "c"), ("c", "a")})


@pytest.mark.slow
def test_process_pool_cancel_then_resume(process_pool, tmp_path):
    _check_cancel_then_resume(process_pool, tmp_path)


@pytest.mark.slow
def test_process_pool_cancel_stops_running_tasks_and_close_leaves_no_process(process_pool, tmp_path):
    ex = process_pool
    for name in ("first", "second", "queued"):
        ex.submit(name, _announce_then_sleep, (str(tmp_path), name, 60.0))
    assert ex.wait(timeout=0.2) is None and ex.in_flight() == 3
    deadline = time.monotonic() + 120  # workers that are not running yet start (spawn, import torch)
    while not ((tmp_path / "first").exists() and (tmp_path / "second").exists()):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    sleepers = [int((tmp_path / name).read_text()) for name in ("first", "second")]
    assert len(set(sleepers)) == 2 and os.getpid() not in sleepers

    ex.cancel()  # the sleepers had 60 s to go: they are terminated, not waited for
    assert ex.in_flight() == 0 and not (tmp_path / "queued").exists()
    assert not any(_alive(pid) for pid in sleepers)
    with pytest.raises(ValueError, match="no task in flight"):
        ex.wait()

    ex.submit("after cancel", _square, (5,))  # a fresh worker takes over
    outcome = ex.wait(timeout=120)
    assert outcome is not None and outcome.value == 25 and _pid(outcome.worker) not in sleepers
    ex.close()
    assert not _alive(_pid(outcome.worker))
    # no worker survives close(); multiprocessing's resource tracker (started by the first spawn, one per
    # interpreter, shared by everything that uses multiprocessing) stays until the interpreter exits
    left = [cmd for cmd in _children().values() if "multiprocessing" in cmd]
    assert all("resource_tracker" in cmd for cmd in left), left


def _write_slowly(path: str) -> None:
    from flare_core.store import atomic

    with atomic.open_npy_writer(path, (None, 2)) as writer:
        writer.write(np.zeros((1, 2), dtype=np.float32))
        time.sleep(60)


@pytest.mark.slow
def test_cancel_lets_a_busy_task_remove_its_temporary_files(tmp_path):
    with LocalExecutor(workers=2) as ex:
        ex.submit("slow", _write_slowly, (str(tmp_path / "out.npy"),))
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".tmp-*")):
            outcome = ex.wait(timeout=0.2)  # a worker that died before writing is reported, not waited for
            assert outcome is None, f"the task ended before it wrote: {outcome.error!r}"
            assert time.monotonic() < deadline, "the worker never started writing"
        ex.cancel()
    assert not list(tmp_path.iterdir())  # the writer's cleanup ran: no temporary file, no output


def test_torch_threads_sets_the_count_inside_the_block_and_restores_it_after_an_error():
    from flare_core.compute.executor import torch_threads

    before = torch.get_num_threads()
    wanted = 1 if before > 1 else 2
    with pytest.raises(RuntimeError, match="inside"), torch_threads(wanted):
        assert torch.get_num_threads() == wanted
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before


def test_a_thread_left_without_gradients_still_trains_each_unit():
    """A worker thread whose earlier task was stopped inside ``torch.no_grad`` keeps gradients off; the
    units it runs next must train all the same, to the numbers of a thread with gradients on."""
    before = sufficiency_matrix(_pool(), estimator="gmm", config=QUICK_GMM, device="cpu")
    with torch.no_grad():
        after = sufficiency_matrix(_pool(), estimator="gmm", config=QUICK_GMM, device="cpu")
    assert after.failed.empty
    _assert_same_numbers(before, after)


def _environment_seen(_: int) -> tuple[int, str | None, str | None]:
    return os.getpid(), os.environ.get("FLARE_OWNER_TOKEN"), os.environ.get("FLARE_TEST_MARKER")


def test_a_pool_task_never_reads_the_owner_token(monkeypatch):
    """A pool started by a process that holds the dashboard's owner token: its tasks do not see it (the
    rest of the environment they do); a serial task, run in this process, does."""
    monkeypatch.setenv("FLARE_OWNER_TOKEN", "owner-token-of-the-dashboard")
    monkeypatch.setenv("FLARE_TEST_MARKER", "inherited")
    pool = LocalExecutor(workers=2, threads_per_worker=1)
    try:
        (remote,) = _run_all(pool, _environment_seen, [0])
    finally:
        pool.close()
    (here,) = _run_all(LocalExecutor(), _environment_seen, [0])
    assert remote.error is None, remote.error
    assert remote.value[0] != os.getpid() and remote.value[1:] == (None, "inherited")
    assert here.value == (os.getpid(), "owner-token-of-the-dashboard", "inherited")
