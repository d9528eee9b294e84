"""The ``flare`` command line: its sub-commands and options, and the entry point that runs one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.cli.commands import (
    PRESET_WIDTH,
    cmd_benchmark,
    cmd_cancel,
    cmd_collapse,
    cmd_delete,
    cmd_demo,
    cmd_doctor,
    cmd_export,
    cmd_import,
    cmd_report,
    cmd_resume,
    cmd_run,
    cmd_runs,
    cmd_show,
    cmd_validate,
)
from flare_core.cli.label_commands import add_label_parser
from flare_core.cli.model_commands import add_budget_options, add_models_parser
from flare_core.cli.serving import DEFAULT_URL, cmd_app, cmd_share
from flare_core.compute import EXECUTORS
from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA
from flare_core.errors import AccessDenied, DamagedFile, RunBusy, RunNotFound
from flare_core.run.params import DEFAULT_CONTROLS, DEFAULT_MAX_DIMS, FLOW_PRESETS, PRESET_MAX_DIMS, USES


def _workers(value: str) -> int | None:
    """``--workers``: a positive number of processes, or ``auto``."""
    if value.strip().lower() == "auto":
        return None
    try:
        workers = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of worker processes or 'auto', got {value!r}"
        ) from None
    if workers < 1:
        raise argparse.ArgumentTypeError(f"workers must be a positive integer or 'auto', got {workers}")
    return workers


def _dims(value: str) -> int | None:
    """``--max-dims``: a number of dimensions (at least 2), or ``all``."""
    if value.strip().lower() == "all":
        return None
    try:
        dims = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of dimensions or 'all', got {value!r}") from None
    if dims < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 dimensions or 'all', got {dims}")
    return dims


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


def build_parser() -> argparse.ArgumentParser:
    """The ``flare`` parser; every sub-command's ``func`` default is the ``cmd_*`` function that runs it."""
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
    add_models_parser(sub, [common, as_json])
    _add_run(sub, common, as_json)
    _add_run_store(sub, common, as_json)
    _add_sharing(sub, common)
    _add_app(sub, common)
    _add_benchmark(sub, common, as_json)
    add_label_parser(sub, common, as_json)
    return parser


def _add_run(sub: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """``flare run``: a corpus, a pool of models, and the options of the analysis."""
    both = [common, as_json]
    p = sub.add_parser("run", parents=both, help="analyse a corpus with a pool of models")
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
    p.add_argument(
        "--qrels",
        type=Path,
        default=None,
        help="search judgements of the corpus's documents: query_id,doc_id,relevance (graded, 0 = not "
        "relevant) or a TREC qrels file; the answer then ranks the models by nDCG@10",
    )
    p.add_argument(
        "--queries",
        type=Path,
        default=None,
        help="the query texts of --qrels (query_id,query), when the judgements name queries by id only",
    )
    p.add_argument(
        "--doc-id-col",
        default=None,
        help="the corpus column of the document ids --qrels names (default: doc_id or id)",
    )
    p.add_argument("--max-rows", type=int, default=None, help="seeded sample of at most this many rows")
    p.add_argument("--drop-duplicates", action="store_true")
    _add_analysis_options(p)
    add_budget_options(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--use",
        choices=list(USES),
        default="unsure",
        help="what the embeddings are for; without labels the answer follows the rule measured best for it",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        choices=[1.0, 2.0, 5.0],
        default=2.0,
        dest="tolerance_points",
        help="'good enough': a model at most this many accuracy points below the best will do (1, 2 or 5)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    p.add_argument("--name", default=None)
    p.add_argument(
        "--background", action="store_true", help="start the run in a background worker and return"
    )
    _add_compute_options(p)
    p.set_defaults(func=cmd_run)


def _add_analysis_options(p: argparse.ArgumentParser) -> None:
    """``flare run``'s options of the analysis: estimators, controls, whitening, collapse."""
    p.add_argument("--estimator", choices=[*ESTIMATOR_NAMES, "both"], default="both")
    p.add_argument("--flow-preset", choices=list(FLOW_PRESETS), default="default")
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
    p.add_argument(
        "--controls",
        default=",".join(DEFAULT_CONTROLS),
        help="comma-separated control models run beside the candidates to show where a model that learned "
        f"nothing lands (never recommended); 'none' for none (default: {','.join(DEFAULT_CONTROLS)})",
    )
    p.add_argument(
        "--max-dims",
        type=_dims,
        default=PRESET_WIDTH,
        help="dimensions each embedding is whitened to before the IS densities are fitted, or 'all' "
        f"(default: the preset's, {DEFAULT_MAX_DIMS}; {PRESET_MAX_DIMS['paper']} for --flow-preset paper)",
    )
    p.add_argument("--no-collapse", action="store_true", help="skip SOCM and layer-wise concentration")
    p.add_argument("--collapse-texts", type=int, default=200)


def _add_compute_options(p: argparse.ArgumentParser) -> None:
    """``flare run``'s options of where and how the units run."""
    p.add_argument(
        "--executor", choices=list(EXECUTORS), default="local", help="where embedding and IS units run"
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=None,
        help="local executor: worker processes running units side by side (1: everything in this "
        "process); default 'auto': a large IS matrix runs on min(2, cores) processes",
    )
    p.add_argument(
        "--batch-conditionals",
        type=int,
        default=None,
        help="flows: train up to this many conditionals of one target together as one batched model "
        "(1: one at a time); default: all of them",
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


def _add_run_store(sub: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """The commands on stored runs: list, show, resume, cancel, delete, collapse, validate."""
    both = [common, as_json]
    p = sub.add_parser("runs", parents=both, help="list stored runs")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", parents=both, help="summarise a run")
    p.add_argument("run_id")
    add_budget_options(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("resume", parents=both, help="finish an interrupted run")
    p.add_argument("run_id")
    p.add_argument(
        "--background",
        action="store_true",
        help="queue it for a background worker instead of running it here",
    )
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("doctor", parents=both, help="check a run (or every run) for damaged files")
    p.add_argument("run_id", nargs="?", default=None, help="one run (default: the whole store)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="set damaged files that a resume can recompute aside, remove leftovers and stale locks",
    )
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("cancel", parents=[common], help="ask a background run to stop")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("delete", parents=[common], help="delete a stored run")
    p.add_argument("run_id")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "collapse",
        parents=both,
        help="mean-pooling collapse (SOCM) of a run's transformer models",
    )
    p.add_argument("run_id")
    p.add_argument(
        "--model", default=None, help="comma-separated models (default: every transformer of the run)"
    )
    p.add_argument("--texts", type=int, default=None, help="number of sampled texts (all pairs among them)")
    p.set_defaults(func=cmd_collapse)

    p = sub.add_parser("validate", parents=both, help="validation studies of a run's ranking")
    p.add_argument("run_id")
    p.add_argument(
        "--studies",
        default="subsampling,aggregation,pool_size,shuffle",
        help="comma-separated: subsampling, aggregation, pool_size, shuffle",
    )
    p.add_argument("--repeats", type=int, default=None, help="repeats per subsample fraction / pool size")
    p.set_defaults(func=cmd_validate)


def _add_sharing(sub: Any, common: argparse.ArgumentParser) -> None:
    """``flare report``, ``flare export``, ``flare share`` and ``flare import``."""
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

    p = sub.add_parser(
        "share",
        parents=[common],
        help="a link that shows one run to someone else (read-only); list or revoke",
    )
    p.add_argument("run_id")
    p.add_argument("--no-texts", action="store_true", help="figures only: no corpus text on any page or file")
    p.add_argument("--expires", default=None, help="30m, 12h, 7d, 2w or a date (2026-12-31); default: never")
    p.add_argument(
        "--url",
        default=None,
        help=f"the dashboard's address in the link (default: $FLARE_PUBLIC_URL or {DEFAULT_URL})",
    )
    p.add_argument("--list", action="store_true", help="list the run's links (never their tokens)")
    p.add_argument(
        "--revoke",
        default=None,
        metavar="NAME",
        help="revoke a link: its name from --list (the token's first 6 characters), a longer beginning "
        "of its token, the whole token, or the whole link",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_share)

    p = sub.add_parser("import", parents=[common], help="add a run bundle (zip) to the run store")
    p.add_argument("bundle", type=Path)
    p.add_argument("--run-id", default=None, help="store it under this id")
    p.set_defaults(func=cmd_import)


def _add_app(sub: Any, common: argparse.ArgumentParser) -> None:
    """``flare demo`` and ``flare app``."""
    p = sub.add_parser("demo", parents=[common], help="build the demo corpus and demo run if missing")
    p.add_argument("--background", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("app", parents=[common], help="open the dashboard")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only); any other, e.g. 0.0.0.0, lets "
        "others reach it and asks the owner for a token (FLARE_OWNER_TOKEN, or one printed at start-up)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="another name the dashboard answers to (repeatable; also FLARE_ALLOWED_HOSTS=a,b), e.g. the "
        "name of a proxy in front of it; requests to any name not its own are refused",
    )
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.add_argument(
        "--no-demo",
        action="store_true",
        help="do not prepare the demo run, nor build the pool's models in the background on a first launch "
        "(flare models --prepare does that)",
    )
    p.add_argument(
        "--dev",
        action="store_true",
        help="development: rerun the pages when their source changes (also FLARE_DEV=1); off, the file "
        "watcher is off",
    )
    p.set_defaults(func=cmd_app)


def _add_benchmark(sub: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    """``flare benchmark``: the product's runs on labelled public corpora, judged by their labels."""
    p = sub.add_parser(
        "benchmark",
        parents=[common, as_json],
        help="judge the recommendation on labelled public corpora (long: about 15 minutes per corpus on 2 "
        "cores)",
    )
    p.add_argument(
        "--corpora",
        default=None,
        help=f"comma-separated corpora (default: all of {', '.join(BENCHMARK_CORPORA)})",
    )
    p.add_argument(
        "--models", default=None, help="comma-separated models (default: every available built-in)"
    )
    p.add_argument("--max-texts", type=int, default=None, help="use the first N texts of each corpus")
    p.add_argument("--flow-preset", default="default", choices=sorted(FLOW_PRESETS))
    p.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the tables between the benchmark markers of this page (docs/benchmark.md)",
    )
    p.add_argument(
        "--docs-section",
        "--readme-section",
        dest="docs_section",
        default=None,
        metavar="NAME",
        help="--docs: write between the markers <!-- benchmark-NAME:start/end --> instead (another "
        "benchmark than the shipped one, e.g. the search corpora's)",
    )
    p.add_argument(
        "--table-only", action="store_true", help="do not run: print (and --docs) the stored benchmark"
    )
    p.add_argument(
        "--add",
        action="store_true",
        help="keep the stored benchmark's other corpora (same models and parameters) and add these to it: "
        "a benchmark run one corpus at a time",
    )
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="do not run: judge the stored benchmark runs again (new scores or baselines), then print",
    )
    p.add_argument(
        "--stage",
        choices=["map", "answer"],
        default="map",
        help="answer: embed every corpus with the whole pool and judge the answer's rules (no estimators; "
        "the vectors are kept, so --rejudge judges again without embedding); map: the product's whole runs",
    )
    p.add_argument(
        "--kept",
        action="store_true",
        help="--stage map: estimate the flows and mixtures from the answer stage's kept vectors (no runs, no "
        "embedding; default: every corpus it judged); --add keeps the other corpora, --rejudge only judges",
    )
    p.set_defaults(func=cmd_benchmark)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except RunNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except AccessDenied as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except DamagedFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
