"""How fast this machine ran each stage of earlier runs, against the stage's prior cost: the plan of the
next run starts from it.

Each finished stage of a run (:func:`keep_stage_speeds`) leaves its measured seconds over its prior
seconds (the plan's, before this machine's figures were applied) in ``<cache>/stage_speeds.json``; a
stage's figure is the geometric mean of its last one and the new ratio, so one run under load moves it
halfway, and it counts the runs behind it. :func:`apply_stage_speeds` scales a new plan's stages by them,
each drawn towards the priors as much as it has few runs behind it: ``ratio ** (n / (n + 1))`` after ``n``
runs (the square root after one). On 2 cores shared with other work one run's stages ran 15 to 35 times
their priors and the next run's 1.4 to 4.4 times: a single run says little about the next. The embedding
stage is left out: its plan already reads each model's speed measured here
(:func:`flare_core.run.eta.measured_cost`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flare_core.run.eta import StagePlan, plan_from_dicts, timestamp_seconds
from flare_core.store import atomic
from flare_core.store.cache_folder import cache_root

STAGE_SPEEDS = "stage_speeds.json"
#: A stage that took less than this (seconds) says too little about the machine to be kept.
MIN_MEASURED_SECONDS = 1.0
#: Bounds of a kept ratio, against nonsense only: a 500-text run's collapse took 28 times its prior on 2
#: cores shared with other work, its downstream stage 22 times (start-up costs the priors leave out).
_LOW, _HIGH = 0.02, 100.0
#: The runs a stage's figure counts at most (its weight against the priors stops growing there).
_MAX_RUNS = 9
#: Stages whose plan is not scaled (their priors already come from this machine).
_OWN_FIGURES = ("embeddings",)


def speeds_path() -> Path:
    """``<cache>/stage_speeds.json``."""
    return cache_root() / STAGE_SPEEDS


def _kept() -> dict[str, tuple[float, int]]:
    """``{stage: (ratio, runs)}`` as kept (empty when none is kept or the file is unreadable)."""
    try:
        stored = json.loads(speeds_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = stored.get("stages") if isinstance(stored, dict) else None
    if not isinstance(found, dict):
        return {}
    kept = {}
    for name, entry in found.items():
        ratio = entry.get("ratio") if isinstance(entry, dict) else None
        runs = entry.get("runs", 1) if isinstance(entry, dict) else None
        if isinstance(ratio, int | float) and _LOW <= ratio <= _HIGH and isinstance(runs, int) and runs >= 1:
            kept[str(name)] = (float(ratio), runs)
    return kept


def load_stage_speeds() -> dict[str, float]:
    """``{stage: the factor a new plan scales it by}`` on this machine: each kept ratio drawn towards 1 by
    the few runs behind it, ``ratio ** (runs / (runs + 1))`` (empty when none is kept)."""
    return {name: ratio ** (runs / (runs + 1)) for name, (ratio, runs) in _kept().items()}


def apply_stage_speeds(plan: Sequence[StagePlan], speeds: Mapping[str, float]) -> list[StagePlan]:
    """``plan`` with each stage's prior and start-up scaled by this machine's figure for it (``speeds``,
    :func:`load_stage_speeds`); stages without one, and the embeddings, as they are."""
    out = []
    for stage in plan:
        ratio = speeds.get(stage.name) if stage.name not in _OWN_FIGURES else None
        if ratio is None:
            out.append(stage)
        else:
            out.append(
                StagePlan(stage.name, stage.units, stage.prior_seconds * ratio, stage.fixed_seconds * ratio)
            )
    return out


def measured_ratios(manifest: Mapping[str, Any]) -> dict[str, float]:
    """``{stage: measured seconds over prior seconds}`` of the finished stages of a run's ``manifest``,
    against the plan before this machine's figures (its ``base_plan``, else its ``plan``); stages that took
    less than :data:`MIN_MEASURED_SECONDS`, and the embeddings, left out."""
    rows = manifest.get("base_plan") or manifest.get("plan") or []
    stages = manifest.get("stages") or {}
    ratios = {}
    for stage in plan_from_dicts(rows):
        entry = stages.get(stage.name) or {}
        started, finished = timestamp_seconds(entry.get("started")), timestamp_seconds(entry.get("finished"))
        if stage.name in _OWN_FIGURES or started is None or finished is None:
            continue
        if stage.total_prior <= 0 or finished - started < MIN_MEASURED_SECONDS:
            continue
        ratios[stage.name] = (finished - started) / stage.total_prior
    return ratios


def keep_stage_speeds(manifest: Mapping[str, Any]) -> dict[str, float]:
    """Fold the :func:`measured_ratios` of a finished run into this machine's figures (see the module
    docstring), under the file's lock; returns the figures kept."""
    from flare_core.store.locks import file_lock

    ratios = measured_ratios(manifest)
    if not ratios:
        return load_stage_speeds()
    with file_lock(speeds_path().with_suffix(".lock")):
        kept = _kept()
        for name, ratio in ratios.items():
            ratio = min(_HIGH, max(_LOW, ratio))
            before, runs = kept.get(name, (None, 0))
            kept[name] = (ratio if before is None else math.sqrt(before * ratio), min(runs + 1, _MAX_RUNS))
        stages = {k: {"ratio": round(r, 4), "runs": n} for k, (r, n) in kept.items()}
        atomic.write_json(speeds_path(), {"version": 1, "stages": stages})
    return load_stage_speeds()
