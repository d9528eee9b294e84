"""A run manifest's structure: its models, their kinds and roles (candidate, partial, control, reference), and
the per-worker unit counts; read and updated through the run store."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from flare_core.store.runs import Run

TRANSFORMER_KINDS = ("transformer", "control-transformer")


def set_model(run: Run, model_id: str, **fields: Any) -> None:
    manifest = run.manifest
    for model in manifest["models"]:
        if model["id"] == model_id:
            model.update(fields)
    run.update(models=manifest["models"])


def model_kind(run: Run, model_id: str) -> str:
    for model in run.manifest["models"]:
        if model["id"] == model_id:
            return model.get("encoder_kind", model.get("kind", ""))
    return ""


#: Roles that are ranked (a partial model is ranked when asked for by name, and flagged).
RANKED_ROLES = ("candidate", "partial")


def roles(run: Run) -> dict[str, str]:
    """Model id → role (candidate, partial, control, reference) of every model of the run."""
    return {m["id"]: m.get("role", "candidate") for m in run.manifest["models"]}


def candidates(run: Run, ok: Sequence[str]) -> list[str]:
    """The models of ``ok`` that are ranked (candidates and partial models), in the manifest's order."""
    role_of = roles(run)
    return [m for m in ok if role_of.get(m) in RANKED_ROLES]


def controls(run: Run, ok: Sequence[str]) -> list[str]:
    """The models of ``ok`` that are controls (IS sources only: they show where a bad model lands)."""
    role_of = roles(run)
    return [m for m in ok if role_of.get(m) == "control"]


def transformer_models(run: Run) -> list[str]:
    """Embedded models of the run that are transformers (the ones with token states: SOCM, layers).

    A control that joined only as a default control (not chosen in the run's models) is left out: it
    serves the ranking, and its token states would only add time.
    """
    chosen = set(run.manifest.get("params", {}).get("models", []))
    return [
        m["id"]
        for m in run.manifest["models"]
        if m.get("status") == "done"
        and model_kind(run, m["id"]) in TRANSFORMER_KINDS
        and (m.get("role") != "control" or m["id"] in chosen)
    ]


def record_worker(
    run: Run, stage: str, unit: str, worker: str | None, seconds: float | None, ok: bool
) -> None:
    """Count a finished unit against the worker process that ran it (shown on the Runs page)."""
    if not worker:
        return
    workers = run.manifest.get("workers", {})
    entry = workers.setdefault(worker, {"units": 0, "failed": 0, "busy_s": 0.0})
    entry["units"] += 1
    entry["failed"] += 0 if ok else 1
    entry["busy_s"] = round(entry["busy_s"] + float(seconds or 0.0), 3)
    entry.update(stage=stage, last_unit=unit, last_seen=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    run.update(workers=workers)
