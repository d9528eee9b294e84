"""The ``flare`` command: the same functions as the dashboard, from a shell.

Every command that reports results takes ``--json``; every command takes ``--runs-dir`` (or reads
``$FLARE_RUNS_DIR``) to choose the run store.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.store.atomic import to_json
from flare_core.store.runs import RunNotFound, RunStore


def _store(args: argparse.Namespace) -> RunStore:
    return RunStore(args.runs_dir)


def _print_json(obj: Any) -> None:
    print(to_json(obj))


def _table(frame: pd.DataFrame, floatfmt: str = "{:.4g}") -> str:
    if frame.empty:
        return "(empty)"
    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    return shown.to_string(index=False)


# -- models -------------------------------------------------------------------------------------------------


def cmd_models(args: argparse.Namespace) -> int:
    from flare_core.encoders import is_available, list_models

    rows = [
        {
            "id": spec.id,
            "dim": spec.dim,
            "layers": spec.layers,
            "kind": spec.kind,
            "source": spec.source,
            "licence": spec.licence,
            "available": is_available(spec.id),
        }
        for spec in list_models()
    ]
    if args.json:
        _print_json(rows)
    else:
        frame = pd.DataFrame(rows)
        frame["available"] = frame["available"].map({True: "yes", False: "no"})
        print(_table(frame))
    return 0


# -- run ----------------------------------------------------------------------------------------------------


def _parse_embeddings(values: Sequence[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--embeddings expects NAME=PATH (a .npy or .parquet file), got {value!r}")
        found[name] = Path(path)
    return found


def _text_limit(value: str) -> int | None:
    """``--max-texts-sufficiency``: a positive count, or ``all``."""
    if value.strip().lower() == "all":
        return None
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of texts or 'all', got {value!r}"
        ) from None
    if count < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 texts or 'all', got {count}")
    return count


def cmd_run(args: argparse.Namespace) -> int:
    from flare_core.data.corpus import AUTO, load_corpus
    from flare_core.encoders import load_precomputed
    from flare_core.run import jobs
    from flare_core.run.create import create_run
    from flare_core.run.params import RunParams

    pair_columns = tuple(args.pair_cols.split(",")) if args.pair_cols else AUTO
    if pair_columns is not AUTO and len(pair_columns) not in (2, 3):
        raise ValueError("--pair-cols expects text_a,text_b,score (STS) or query,document (retrieval)")
    corpus = load_corpus(
        args.corpus,
        text_column=args.text_col,
        label_column=None if args.no_labels else (args.label_col or AUTO),
        pair_columns=pair_columns,
        drop_duplicates=args.drop_duplicates,
        max_rows=args.max_rows,
        seed=args.seed,
    )
    warning = corpus.stats.get("encoding_warning")
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    precomputed = {
        name: load_precomputed(path, n_rows=len(corpus), name=name)
        for name, path in _parse_embeddings(args.embeddings).items()
    }
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else []
    estimators = ["flow", "gmm"] if args.estimator == "both" else [args.estimator]
    references = [m.strip() for m in args.references.split(",") if m.strip()] if args.references else []
    if references == ["builtin"]:
        from flare_core.encoders import is_available, list_models

        references = [s.id for s in list_models() if s.id not in models and is_available(s.id)]
    params = RunParams(
        models=models,
        estimators=estimators,
        flow_preset=args.flow_preset,
        max_texts_sufficiency=args.max_texts_sufficiency,
        reference_pool=references,
        collapse=not args.no_collapse,
        collapse_texts=args.collapse_texts,
        concentration=not args.no_collapse,
        seed=args.seed,
        device=args.device,
        executor=args.executor,
        ray_address=args.ray_address,
        workers=args.workers,
        autocast=args.autocast,
        batch_conditionals=args.batch_conditionals,
    )
    if not models and not precomputed:
        raise ValueError("choose at least one model with --models or --embeddings")
    run = create_run(_store(args), corpus, params, name=args.name, precomputed=precomputed)
    print(f"run {run.id}: {len(corpus)} texts, {len(run.manifest['models'])} models", file=sys.stderr)
    if args.background:
        jobs.start(_store(args), run.id)
        status = "queued"
    else:
        status = jobs.run_in_process(run, progress_bar=not args.json)
    manifest = run.manifest
    if args.json:
        _print_json({"run_id": run.id, "status": status, "error": manifest.get("error")})
    else:
        failed = [m for m in manifest["models"] if m.get("status") == "failed"]
        for model in failed:
            print(f"model {model['id']} failed: {model.get('error')}", file=sys.stderr)
        if status == "failed":
            print(f"run failed: {manifest.get('error')}", file=sys.stderr)
        print(run.id)
    return 0 if status in ("done", "queued") else 1


def cmd_resume(args: argparse.Namespace) -> int:
    from flare_core.run import jobs

    run = _store(args).get(args.run_id)
    if run.status == "done":
        print(f"run {run.id} is already done", file=sys.stderr)
        return 0
    if run.cancel_requested():
        run.artefact("cancel.requested").unlink()
    status = jobs.run_in_process(run, progress_bar=not args.json)
    if args.json:
        _print_json({"run_id": run.id, "status": status, "error": run.manifest.get("error")})
    else:
        print(run.id)
    return 0 if status == "done" else 1


def cmd_cancel(args: argparse.Namespace) -> int:
    from flare_core.run import jobs

    jobs.cancel(_store(args), args.run_id)
    print(f"cancellation requested for {args.run_id}", file=sys.stderr)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    _store(args).delete(args.run_id)
    print(f"deleted {args.run_id}", file=sys.stderr)
    return 0


# -- runs / show --------------------------------------------------------------------------------------------


def run_rows(store: RunStore) -> list[dict[str, Any]]:
    from flare_core.run.jobs import effective_status

    rows = []
    for manifest in store.list():
        progress = manifest.get("progress") or {}
        rows.append(
            {
                "id": manifest["id"],
                "name": manifest.get("name"),
                "status": effective_status(store.get(manifest["id"])),
                "texts": manifest.get("corpus", {}).get("n_texts"),
                "models": ",".join(m["id"] for m in manifest.get("models", [])),
                "created": manifest.get("created"),
                "stage": progress.get("stage", ""),
                "progress": f"{progress.get('done', '')}/{progress.get('total', '')}" if progress else "",
            }
        )
    return rows


def cmd_runs(args: argparse.Namespace) -> int:
    rows = run_rows(_store(args))
    if args.json:
        _print_json(rows)
    elif not rows:
        print(f"no runs in {_store(args).root}")
    else:
        print(_table(pd.DataFrame(rows)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from flare_core.view.results import run_results

    run = _store(args).get(args.run_id)
    results = run_results(run)
    if args.json:
        _print_json(results)
        return 0
    manifest = results["manifest"]
    corpus = manifest["corpus"]
    print(f"run {manifest['id']} ({manifest.get('name')}): {results['status']}")
    print(
        f"corpus: {corpus['source_name']}, {corpus['n_texts']} texts, labels: {corpus.get('label_column') or 'none'}"
    )
    if manifest.get("error"):
        print(f"error: {manifest['error']}")
    for model in manifest["models"]:
        extra = f" ({model.get('error')})" if model.get("status") == "failed" else ""
        print(
            f"  {model['id']:<28} {model.get('role', ''):<10} {model.get('status', ''):<8} dim={model.get('dim')}{extra}"
        )
    if results.get("verdict"):
        print()
        print(results["verdict"]["text"])
    for estimator, block in results.get("sufficiency", {}).items():
        print(
            f"\nranking by information sufficiency ({estimator}, median IS/d_target, 95% bootstrap interval):"
        )
        print(_table(pd.DataFrame(block["scores"])))
    if results.get("summary"):
        print("\nper-model figures:")
        print(_table(pd.DataFrame(results["summary"])))
    if results.get("correlations"):
        print("\ncorrelation of label-free scores with downstream scores (Spearman):")
        frame = pd.DataFrame(results["correlations"])
        pivot = frame.pivot(index="label_free", columns="downstream", values="spearman_rho")
        print(pivot.to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


# -- collapse -----------------------------------------------------------------------------------------------


def cmd_collapse(args: argparse.Namespace) -> int:
    from flare_core.run.token_stages import recompute_collapse

    run = _store(args).get(args.run_id)
    models = [m.strip() for m in args.model.split(",")] if args.model else None
    result = recompute_collapse(run, models=models, n_texts=args.texts)
    if args.json:
        _print_json(result)
    else:
        print(_table(pd.DataFrame(result["summary"])))
    return 0


# -- validate / report / bundles ----------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from flare_core.run.params import RunParams
    from flare_core.run.studies import run_studies
    from flare_core.run.summary import summarise

    run = _store(args).get(args.run_id)
    studies = [s.strip() for s in args.studies.split(",") if s.strip()]
    params = RunParams.from_dict(run.manifest["params"])
    digest = run_studies(run, studies, repeats=args.repeats or params.validation_repeats)
    summarise(run)
    if args.json:
        _print_json(
            {
                "run_id": run.id,
                "validation": digest,
                "verdict": run.load_json("verdict.json") if run.has("verdict.json") else None,
            }
        )
        return 0
    for estimator, block in digest.items():
        if estimator == "shuffle":
            print("\nshuffled pairing (IS per dimension should fall to 0 at p = 1):")
            print(_table(pd.DataFrame(block)))
            continue
        for study, rows in block.items():
            if isinstance(rows, list):
                print(f"\n{estimator} · {study}:")
                print(_table(pd.DataFrame(rows)))
    if run.has("verdict.json"):
        print("\n" + run.load_json("verdict.json")["text"])
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from flare_core.view.report import write_report

    run = _store(args).get(args.run_id)
    out = write_report(run, args.output or Path(f"{run.id}.html"), include_texts=not args.no_texts)
    print(out)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from flare_core.store.bundle import export_run

    run = _store(args).get(args.run_id)
    print(export_run(run, args.output or Path(f"{run.id}.zip"), include_texts=not args.no_texts))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from flare_core.store.bundle import import_run

    run = import_run(_store(args), args.bundle, run_id=args.run_id)
    print(run.id)
    return 0


# -- app / demo ---------------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from flare_core.run.demo import ensure_demo_run

    run_id = ensure_demo_run(_store(args), background=args.background)
    print(run_id)
    return 0


def cmd_app(args: argparse.Namespace) -> int:
    app = Path(__file__).resolve().parent.parent / "app.py"
    if not app.is_file():
        raise FileNotFoundError(f"the dashboard script {app} is missing; run from a source checkout")
    env = dict(os.environ)
    env["FLARE_RUNS_DIR"] = str(_store(args).root.resolve())
    if not args.no_demo:
        from flare_core.run.demo import ensure_demo_run

        run_id = ensure_demo_run(_store(args), background=True)
        print(f"demo run: {run_id}", file=sys.stderr)
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port)]
    if args.headless:
        cmd += ["--server.headless", "true"]
    return subprocess.call(cmd, env=env)


# -- parser -------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--runs-dir", type=Path, default=None, help="run store folder (default: $FLARE_RUNS_DIR or ./runs)"
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="flare", description="FLARE Studio: choose an embedding model without labels."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", parents=[common, as_json], help="list the model registry")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("run", parents=[common, as_json], help="analyse a corpus with a pool of models")
    p.add_argument("corpus", type=Path, help="CSV, TSV, Parquet or JSONL file")
    p.add_argument("--models", default="", help="comma-separated registry ids, hub ids or local folders")
    p.add_argument(
        "--embeddings",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="precomputed embeddings (.npy or .parquet) as an extra model",
    )
    p.add_argument("--text-col", default=None)
    p.add_argument("--label-col", default=None, help="label column (default: detected)")
    p.add_argument("--no-labels", action="store_true", help="ignore any label column")
    p.add_argument(
        "--pair-cols", default=None, help="text_a,text_b,score columns (STS) or query,document (retrieval)"
    )
    p.add_argument("--max-rows", type=int, default=None, help="seeded sample of at most this many rows")
    p.add_argument("--drop-duplicates", action="store_true")
    p.add_argument("--estimator", choices=["flow", "gmm", "both"], default="both")
    p.add_argument("--flow-preset", choices=["fast", "default"], default="default")
    p.add_argument(
        "--max-texts-sufficiency",
        type=_text_limit,
        default=2000,
        help="texts used by the IS estimators (a seeded sample), or 'all'",
    )
    p.add_argument(
        "--references",
        default="",
        help="comma-separated models used only as IS targets (not ranked); 'builtin' adds every available "
        "built-in model and control",
    )
    p.add_argument("--no-collapse", action="store_true", help="skip SOCM and layer-wise concentration")
    p.add_argument("--collapse-texts", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    p.add_argument("--name", default=None)
    p.add_argument(
        "--background", action="store_true", help="start the run in a background worker and return"
    )
    p.add_argument(
        "--executor", choices=["local", "ray"], default="local", help="where embedding and IS units run"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="local executor: worker processes running units side by side (1: in this process)",
    )
    p.add_argument(
        "--batch-conditionals",
        type=int,
        default=1,
        help="flows: train up to this many conditionals of one target together as one batched model",
    )
    p.add_argument(
        "--autocast",
        action="store_true",
        help="flows: bfloat16 matrix products in the conditioners (GPU); transforms stay float32",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="'auto' joins the cluster of this machine; ray://host:10001; default: a local Ray instance",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", parents=[common, as_json], help="list stored runs")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", parents=[common, as_json], help="summarise a run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("resume", parents=[common, as_json], help="finish an interrupted run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("cancel", parents=[common], help="ask a background run to stop")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("delete", parents=[common], help="delete a stored run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "collapse",
        parents=[common, as_json],
        help="mean-pooling collapse (SOCM) of a run's transformer models",
    )
    p.add_argument("run_id")
    p.add_argument(
        "--model", default=None, help="comma-separated models (default: every transformer of the run)"
    )
    p.add_argument("--texts", type=int, default=None, help="number of sampled texts (all pairs among them)")
    p.set_defaults(func=cmd_collapse)

    p = sub.add_parser("validate", parents=[common, as_json], help="validation studies of a run's ranking")
    p.add_argument("run_id")
    p.add_argument(
        "--studies", default="subsampling,aggregation,pool_size,shuffle",
        help="comma-separated: subsampling, aggregation, pool_size, shuffle",
    )  # fmt: skip
    p.add_argument("--repeats", type=int, default=None, help="repeats per subsample fraction / pool size")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("report", parents=[common], help="self-contained HTML report of a run")
    p.add_argument("run_id")
    p.add_argument("-o", "--output", type=Path, default=None)
    p.add_argument("--no-texts", action="store_true", help="leave every corpus text out of the report")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", parents=[common], help="zip a run to open it elsewhere")
    p.add_argument("run_id")
    p.add_argument("-o", "--output", type=Path, default=None)
    p.add_argument("--no-texts", action="store_true", help="strip the corpus texts from the bundle")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common], help="add a run bundle (zip) to the run store")
    p.add_argument("bundle", type=Path)
    p.add_argument("--run-id", default=None, help="store it under this id")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("demo", parents=[common], help="build the demo corpus and demo run if missing")
    p.add_argument("--background", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("app", parents=[common], help="open the dashboard")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.add_argument("--no-demo", action="store_true", help="do not prepare the demo run")
    p.set_defaults(func=cmd_app)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except RunNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
