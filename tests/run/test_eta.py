"""Time-left estimates against planted unit times."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.run.eta import StagePlan, StageState, describe_remaining, remaining_seconds

PLAN = [
    StagePlan("embeddings", 8, 20.0),
    StagePlan("maps", 8, 4.0),
    StagePlan("sufficiency_flow", 80, 1.0),
    StagePlan("sufficiency_gmm", 80, 0.3),
    StagePlan("collapse", 3, 10.0),
]


def _simulate(machine: float, seed: int, stage_spread: float = 0.15, unit_spread: float = 0.3):
    """Unit finishing times of PLAN on a machine ``machine`` times slower than the priors.

    Each stage is off its prior by its own factor (log-normal, ``stage_spread``), each unit by
    another (``unit_spread``). Returns [(stage index, units done in it, finishing time)].
    """
    rng = np.random.default_rng(seed)
    t, events = 0.0, []
    for index, stage in enumerate(PLAN):
        stage_factor = machine * float(np.exp(rng.normal(0, stage_spread)))
        for done in range(1, stage.units + 1):
            t += stage.prior_seconds * stage_factor * float(np.exp(rng.normal(0, unit_spread)))
            events.append((index, done, t))
    return events


def _states_at(events, upto: int):
    index, done, now = events[upto]
    states = {}
    start = 0.0
    for i, stage in enumerate(PLAN):
        ends = [e[2] for e in events if e[0] == i]
        if i < index:
            states[stage.name] = StageState(stage.units, start, ends[-1])
            start = ends[-1]
        elif i == index:
            states[stage.name] = StageState(done, start, ends[-1] if done == stage.units else None)
    return states, now


@pytest.mark.parametrize("machine", [0.4, 1.0, 2.5])
@pytest.mark.parametrize("seed", range(5))
def test_within_30_percent_from_a_fifth_of_the_units_to_the_last_tenth_of_the_time(machine, seed):
    events = _simulate(machine, seed)
    total_units = len(events)
    finish = events[-1][2]
    for upto in range(len(events) - 1):
        if upto + 1 < 0.2 * total_units:
            continue
        states, now = _states_at(events, upto)
        truth = finish - now
        estimate = remaining_seconds(PLAN, states, now)
        assert estimate is not None
        # until the last tenth of the run, where one unit's noise is most of what is left
        if truth >= 0.1 * finish:
            assert abs(estimate - truth) <= 0.3 * truth, (upto, estimate, truth)


def test_nothing_measured_yet_gives_no_estimate():
    assert remaining_seconds(PLAN, {}, now=10.0) is None
    assert remaining_seconds(PLAN, {"embeddings": StageState(0, 0.0)}, now=10.0) is None


def test_a_finished_run_has_nothing_left():
    states = {s.name: StageState(s.units, float(i), float(i + 1)) for i, s in enumerate(PLAN)}
    assert remaining_seconds(PLAN, states, now=100.0) == 0.0


def test_words():
    assert describe_remaining(None) == "estimating time left"
    assert describe_remaining(20) == "under a minute left"
    assert describe_remaining(250) == "about 4 min left"
    assert describe_remaining(7200) == "about 2.0 h left"
    with pytest.raises(ValueError):
        StagePlan("x", -1, 1.0)


def test_progress_sentence_of_a_running_manifest():
    from datetime import datetime, timezone

    from flare_core.run.progress import progress_sentence

    def stamp(t: float) -> str:
        return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()

    start = 1_000_000.0
    manifest = {
        "started": stamp(start),
        "plan": [
            {"name": "embeddings", "units": 2, "prior_seconds": 10.0},
            {"name": "sufficiency_flow", "units": 10, "prior_seconds": 6.0},
        ],  # fmt: skip
        "stages": {
            "embeddings": {"work_done": 2, "started": stamp(start), "finished": stamp(start + 20)},
            "sufficiency_flow": {"work_done": 4, "started": stamp(start + 20), "finished": None},
        },
        "progress": {"stage": "sufficiency_flow", "done": 4, "total": 10},
    }
    # 4 flow units took 120 s: the 6 left take about 180 s more
    sentence = progress_sentence(manifest, now=start + 140)
    assert sentence == (
        "learning how well each model predicts the others: 4 of 10 · running for 2 min · about 3 min left"
    )
    assert progress_sentence({}, now=start) == "estimating time left"
