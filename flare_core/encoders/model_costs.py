"""The registry with what each model costs here, measured once on a standard sample (``flare models
--measure``), and the models of a pool that fit a budget of width and speed.

The standard sample is the first ``n`` snippets of the rotten-tomatoes benchmark corpus (short movie-review
sentences, 110 characters on average); the expected time of a corpus scales each model's characters per
second to the corpus's characters and adds its load time
(:func:`flare_core.run.eta.expected_embedding_seconds`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flare_core.checks import check_int, check_number
from flare_core.encoders.cost import (
    device_kind,
    files_bytes,
    load_measurements,
    measure_models,
    save_measurements,
    vector_bytes,
)

STANDARD_SAMPLE = "rotten-tomatoes"
DEFAULT_MEASURE_TEXTS = 500
#: Figures measured elsewhere and shipped with the package, shown under ``by_device`` beside this machine's.
REFERENCE_COSTS = Path(__file__).with_name("reference_costs.json")
#: The measured fields copied into a registry row (the rest of a measurement stays under ``by_device``).
MEASURED = ("texts_per_s", "chars_per_s", "load_s", "peak_memory_mib", "gpu_peak_memory_mib")


def this_device_kind(device: str | None) -> str:
    """The device kind (``cpu``, ``cuda`` …) under which the measurements of ``device`` are kept (None: the
    default device)."""
    from flare_core.device import pick_device

    return device_kind(str(pick_device(device)))


def model_rows(device: str | None = None) -> list[dict[str, Any]]:
    """One row per registry model: its spec (``id``, ``dim``, ``layers``, ``kind``, ``role``, ``family``,
    ``source``, ``licence``), ``available``, ``model_size_mib`` (its files here; None for models fitted on
    the corpus or not built yet), the bytes per vector, the figures measured on this machine's ``device``
    kind (``texts_per_s`` … ``peak_memory_mib``, None when not measured, with ``measured_texts`` and
    ``measured``) and ``by_device``: every device kind's measurement here, and the reference figures shipped
    with the package (:data:`REFERENCE_COSTS`, their kinds marked "reference")."""
    from flare_core.encoders import is_available, list_models
    from flare_core.encoders.model_pool import POOL

    stored = load_measurements()
    reference = json.loads(REFERENCE_COSTS.read_text(encoding="utf-8"))["devices"]
    kind = this_device_kind(device)
    rows = []
    for spec in list_models():
        size = files_bytes(POOL[spec.id].files())
        mine = stored.get(kind, {}).get(spec.id, {})
        row: dict[str, Any] = {
            "id": spec.id,
            "dim": spec.dim,
            "layers": spec.layers,
            "kind": spec.kind,
            "role": spec.role,
            "family": spec.family,
            "source": spec.source,
            "licence": spec.licence,
            "available": is_available(spec.id),
            "model_size_mib": round(size / 2**20, 2) if size else None,
        }
        row |= (
            vector_bytes(spec.dim)
            if spec.dim
            else {"bytes_per_vector_float32": None, "bytes_per_vector_int8": None}
        )
        row |= {field: mine.get(field) for field in MEASURED}
        row |= {"measured_texts": mine.get("texts"), "measured": mine.get("measured"), "device": kind}
        row["by_device"] = {k: v[spec.id] for k, v in (stored | reference).items() if spec.id in v}
        rows.append(row)
    return rows


def standard_sample(n: int = DEFAULT_MEASURE_TEXTS) -> list[str]:
    """The first ``n`` texts of the standard sample (at most the corpus's 2,000)."""
    from flare_core.data.benchmark_corpora import load_benchmark_corpus

    check_int(n, "texts", min_value=2)
    return load_benchmark_corpus(STANDARD_SAMPLE).frame["text"].astype(str).tolist()[:n]


def measure_registry(
    models: Sequence[str] | None = None,
    *,
    n_texts: int = DEFAULT_MEASURE_TEXTS,
    device: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Measure ``models`` (default: every available registry model) on the standard sample and store the
    figures under this machine's device kind; returns ``{model id: measurement or {"error": ...}}``."""
    from flare_core.encoders import check_model_ids, is_available, list_models

    chosen = check_model_ids(models) if models else [s.id for s in list_models() if is_available(s.id)]
    texts = standard_sample(n_texts)
    found = measure_models(chosen, texts, device=device, progress=progress)
    kind = this_device_kind(device)
    save_measurements({m: r for m, r in found.items() if "error" not in r}, kind)
    return found


def budget_reasons(
    models: Sequence[str],
    *,
    max_width: int | None = None,
    min_texts_per_s: float | None = None,
    widths: dict[str, int | None] | None = None,
    speeds: dict[str, float | None] | None = None,
) -> dict[str, str]:
    """``{model: why it is outside the budget}`` for the ``models`` wider than ``max_width`` dimensions or
    slower than ``min_texts_per_s``; ``widths`` and ``speeds`` default to the registry's widths and this
    machine's measurements. A model whose width or speed is unknown is kept."""
    check_int(max_width, "max_width", min_value=1, allow_none=True)
    check_number(min_texts_per_s, "min_texts_per_s", min_value=0, allow_none=True)
    if widths is None or speeds is None:
        rows = {row["id"]: row for row in model_rows()}
        widths = widths if widths is not None else {m: rows.get(m, {}).get("dim") for m in models}
        speeds = speeds if speeds is not None else {m: rows.get(m, {}).get("texts_per_s") for m in models}
    reasons = {}
    for model in models:
        width, speed = widths.get(model), speeds.get(model)
        if max_width is not None and width is not None and width > max_width:
            reasons[model] = f"{width} dimensions, more than {max_width}"
        elif min_texts_per_s is not None and speed is not None and speed < min_texts_per_s:
            reasons[model] = f"{speed:.0f} texts per second, fewer than {min_texts_per_s:g}"
    return reasons


def describe_budget(max_width: int | None, min_texts_per_s: float | None) -> str:
    """``"under 256 dimensions, at ≥ 500 texts/s"`` (empty without a budget)."""
    parts = []
    if max_width is not None:
        parts.append(f"at most {max_width} dimensions")
    if min_texts_per_s is not None:
        parts.append(f"at ≥ {min_texts_per_s:g} texts/s")
    return ", ".join(parts)
