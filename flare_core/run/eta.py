"""Time left for a running run, from the measured rate of the work done so far.

A run's work is planned as stages of units (an embedding model, a marginal or conditional density, a
model's map ...), each stage with a prior cost per unit for a 2-core laptop CPU. The estimate:

- a finished stage costs what it took;
- a running stage's units left cost its measured time per unit so far;
- a stage not started yet costs its prior, scaled by how much faster or slower this machine has been
  than the priors on the work measured so far (the ratio of measured to prior seconds, kept within
  [0.2, 5]).

``remaining_seconds`` is None until one unit has finished (nothing measured yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flare_core.checks import check_int, check_number

_MIN_FACTOR, _MAX_FACTOR = 0.2, 5.0


@dataclass(frozen=True)
class StagePlan:
    """``units`` of work in stage ``name``, each expected to take ``prior_seconds`` on a 2-core CPU."""

    name: str
    units: int
    prior_seconds: float

    def __post_init__(self) -> None:
        check_int(self.units, "units", min_value=0)
        check_number(self.prior_seconds, "prior_seconds", min_value=0)


@dataclass(frozen=True)
class StageState:
    """What has happened in a stage: ``done`` units, ``started`` and (when over) ``finished`` times."""

    done: int = 0
    started: float | None = None
    finished: float | None = None


def remaining_seconds(
    plan: Sequence[StagePlan], states: Mapping[str, StageState], now: float
) -> float | None:
    """Estimated seconds until every stage of ``plan`` is done (see the module docstring)."""
    measured = prior_of_measured = 0.0
    left_running = 0.0
    future_prior = 0.0
    for stage in plan:
        state = states.get(stage.name, StageState())
        if state.started is None:
            future_prior += stage.units * stage.prior_seconds
            continue
        end = state.finished if state.finished is not None else now
        spent = max(0.0, end - state.started)
        if state.finished is not None or state.done >= stage.units:
            measured += spent
            prior_of_measured += stage.units * stage.prior_seconds
        elif state.done > 0:
            per_unit = spent / state.done
            measured += spent
            prior_of_measured += state.done * stage.prior_seconds
            left_running += per_unit * (stage.units - state.done)
        else:  # started, nothing finished yet: its prior, like a stage to come
            future_prior += stage.units * stage.prior_seconds
    if measured <= 0 or prior_of_measured <= 0:
        return None
    factor = min(_MAX_FACTOR, max(_MIN_FACTOR, measured / prior_of_measured))
    return left_running + future_prior * factor


def describe_remaining(seconds: float | None) -> str:
    """ "about 4 min left", "under a minute left", or "estimating time left" (plain words)."""
    if seconds is None:
        return "estimating time left"
    if seconds < 60:
        return "under a minute left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes / 60:.1f} h left"


def plan_from_dicts(rows: Sequence[Mapping[str, Any]]) -> list[StagePlan]:
    """The plan stored in a run's manifest (a list of ``{"name", "units", "prior_seconds"}``)."""
    return [StagePlan(str(r["name"]), int(r["units"]), float(r["prior_seconds"])) for r in rows]


# -- a run's plan and its time left, from its manifest ----------------------------------------------------

#: Prior cost of embedding one text with a model as heavy as all-MiniLM-L6-v2 (6 layers × 384), 2 cores.
_EMBED_SECONDS = 0.01
#: Relative embedding cost by kind of model, MiniLM = 1 (measured on 2,000 texts, 2 cores: the ONNX
#: 3-layer model took 0.3–1.5 and the compiled e5-small 3–13 times MiniLM's time, depending on the load).
_KIND_WEIGHT = {"onnx": 0.6, "compiled": 4.0, "static": 0.02, "corpus": 0.1, "precomputed": 0.0}


def embedding_weight(spec: Any) -> float:
    """How costly embedding one text with the model of ``spec`` is, relative to all-MiniLM-L6-v2.

    A transformer costs a fixed half (tokenising, pooling, moving batches) plus a half that grows with
    layers × width² (its matrix products): all-mpnet-base-v2 (12 × 768) weighs 4.5, and took 7–10 times
    MiniLM's time on 2,000 texts here; the 3-layer MiniLM weighs 0.75 (measured 0.9–1.6).
    """
    kind = getattr(spec, "kind", "hub")
    if kind == "transformer" and spec.layers and spec.dim:
        return 0.5 + 0.5 * spec.layers * spec.dim**2 / (6 * 384**2)
    return _KIND_WEIGHT.get(kind, 1.0)


def run_plan(
    *,
    n_texts: int,
    n_fit: int,
    weights: Mapping[str, float],
    estimators: Sequence[str],
    is_units: int,
    n_transformers: int,
    collapse_texts: int,
    geometry: bool,
    downstream: bool,
    validation: bool,
    maps: bool,
    collapse: bool,
    concentration: bool,
) -> list[StagePlan]:
    """The stages of a run with their prior unit costs on a 2-core CPU (see the module docstring).

    ``weights``: each model's :func:`embedding_weight`; the embedding stage counts weighted texts.
    ``n_fit``: texts the IS estimators train on; ``is_units``: marginals + conditionals per estimator.
    """
    models = len(weights)
    scale = n_texts / 2000
    fit = n_fit / 1800
    plan = [StagePlan("embeddings", max(1, round(sum(weights.values()) * n_texts)), _EMBED_SECONDS)]
    per_unit = {"flow": 1.2 * fit, "gmm": 0.3 * fit}
    plan += [StagePlan(f"sufficiency_{e}", is_units, per_unit.get(e, 1.0 * fit)) for e in estimators]
    if geometry:
        plan.append(StagePlan("geometry", models, 0.5 * scale))
    if downstream:
        plan.append(StagePlan("downstream", models, 2.0 * scale))
    if validation:
        plan.append(StagePlan("validation", len(estimators) + 1, 2.0))
    if maps:
        plan.append(StagePlan("maps", models, 5.0 * min(scale, 1.5)))
    if collapse and n_transformers:
        plan.append(StagePlan("collapse", n_transformers, 10.0 * (collapse_texts / 200) ** 2))
    if concentration and n_transformers:
        plan.append(StagePlan("concentration", n_transformers, 3.0))
    return plan


def timestamp_seconds(stamp: str | None) -> float | None:
    """Seconds since the epoch of an ISO timestamp from a manifest, or None."""
    if not stamp:
        return None
    import datetime as _dt

    return _dt.datetime.fromisoformat(stamp).timestamp()


def manifest_remaining_seconds(manifest: Mapping[str, Any], now: float) -> float | None:
    """Seconds left for a running run, from the plan and the stage records in its ``manifest``."""
    rows = manifest.get("plan")
    if not rows:
        return None
    states = {}
    for name, entry in (manifest.get("stages") or {}).items():
        done = entry.get("work_done", entry.get("done", 0))
        states[name] = StageState(
            int(done), timestamp_seconds(entry.get("started")), timestamp_seconds(entry.get("finished"))
        )
    return remaining_seconds(plan_from_dicts(rows), states, now)
