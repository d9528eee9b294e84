"""``flare models`` (the registry, with what each model costs here, and ``--measure``) and the budget
options of ``flare run`` and ``flare show`` (``--max-width``, ``--min-texts-per-s``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import pandas as pd

from flare_core.store.atomic import to_json
from flare_core.view.results import shown_blank

#: The columns ``flare models`` prints (``--json`` has every field).
TABLE_COLUMNS = [
    "id",
    "dim",
    "kind",
    "role",
    "family",
    "available",
    "texts_per_s",
    "peak_memory_mib",
    "model_size_mib",
    "bytes_per_vector_float32",
    "bytes_per_vector_int8",
]


def add_models_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``flare models [--json] [--prepare] [--measure [--texts N] [--models IDS] [--device D]]``."""
    p = sub.add_parser(
        "models", parents=parents, help="list the model registry and what each model costs here"
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="measure speed, load time and peak memory of every available model on a standard sample "
        "and keep the figures (the New run page shows the expected time from them)",
    )
    p.add_argument(
        "--prepare",
        action="store_true",
        help="make every model of the pool ready now (unpack all-mpnet-base-v2, build the distilled static "
        "models), so that a first run does not wait for them; nothing to do once done",
    )
    p.add_argument("--texts", type=int, default=500, help="--measure: texts of the standard sample (500)")
    p.add_argument(
        "--models", default=None, help="--measure: comma-separated models (default: all available)"
    )
    p.add_argument("--device", default=None, help="--measure: cpu, cuda, mps (default: best available)")
    p.set_defaults(func=cmd_models)


def add_budget_options(p: argparse.ArgumentParser) -> None:
    """The budget of ``flare run`` (models outside it are left out of the pool) and ``flare show`` (the
    best model within it is named)."""
    p.add_argument(
        "--max-width",
        type=int,
        default=None,
        help="budget: only models whose embeddings have at most this many dimensions (not --max-dims, "
        "the whitened width of the IS estimators)",
    )
    p.add_argument(
        "--min-texts-per-s",
        type=float,
        default=None,
        help="budget: only models that embed at least this many texts per second (measured by flare models "
        "--measure for flare run, by the run itself for flare show)",
    )


def cmd_models(args: argparse.Namespace) -> int:
    from flare_core.encoders.model_costs import measure_registry, model_rows

    if args.prepare:
        from flare_core.encoders.prepare import prepare_models

        prepare_models(progress=lambda line: print(line, flush=True))
        return 0
    if args.measure:
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        found = measure_registry(
            models, n_texts=args.texts, device=args.device, progress=lambda m: print(m, file=sys.stderr)
        )
        for model, record in found.items():
            if "error" in record:
                print(f"{model}: not measured: {record['error']}", file=sys.stderr)
    rows = model_rows(args.device)
    if args.json:
        print(to_json(rows))
        return 0
    frame = pd.DataFrame(rows)[TABLE_COLUMNS]
    for column in ("dim", "bytes_per_vector_float32", "bytes_per_vector_int8"):
        frame[column] = frame[column].astype("Int64")
    frame["available"] = frame["available"].map({True: "yes", False: "no"})
    print(shown_blank(frame).to_string(index=False))
    if not frame["texts_per_s"].notna().any():
        print(
            "\nspeed and memory: not measured on this machine yet (flare models --measure)", file=sys.stderr
        )
    return 0


def budget_models(models: list[str], args: argparse.Namespace) -> list[str]:
    """``flare run``: the ``models`` within the budget of ``args``; says which were left out and why."""
    from flare_core.encoders.model_costs import budget_reasons

    if args.max_width is None and args.min_texts_per_s is None:
        return models
    reasons = budget_reasons(models, max_width=args.max_width, min_texts_per_s=args.min_texts_per_s)
    for model, why in reasons.items():
        print(f"budget: {model} left out ({why})", file=sys.stderr)
    kept = [m for m in models if m not in reasons]
    if models and not kept:
        raise ValueError("no model of --models fits the budget (--max-width, --min-texts-per-s)")
    return kept


def budget_result(run: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    """``flare show``: the best model of ``run`` within the budget of ``args`` (None without a budget)."""
    from flare_core.encoders.model_costs import budget_reasons, describe_budget
    from flare_core.view.tradeoff import cheapest_sentence, tradeoff_view

    if args.max_width is None and args.min_texts_per_s is None:
        return None
    view = tradeoff_view(run)
    words = describe_budget(args.max_width, args.min_texts_per_s)
    if view is None:
        return {"budget": words, "best": None, "left_out": {}, "sentence": "The run has no scores yet."}
    costs = view["costs"]
    reasons = budget_reasons(
        costs["model"].tolist(),
        max_width=args.max_width,
        min_texts_per_s=args.min_texts_per_s,
        widths=dict(zip(costs["model"], costs["bytes_per_vector_int8"], strict=True)),
        speeds=dict(zip(costs["model"], costs["texts_per_s"], strict=True)),
    )
    quality = view["quality"][~view["quality"]["model"].isin(reasons)]
    if quality.empty:
        sentence = f"No model of this run fits the budget ({words})."
        return {"budget": words, "best": None, "left_out": reasons, "sentence": sentence}
    best = quality.loc[quality["quality"].astype(float).idxmax()]
    sentence = f"Best {words}: {best['model']} ({best['label']}: {float(best['quality']):.4g})."
    cheapest = cheapest_sentence({"quality": quality, "costs": costs})
    return {
        "budget": words,
        "best": str(best["model"]),
        "left_out": reasons,
        "sentence": sentence + (f" {cheapest}" if cheapest else ""),
    }
