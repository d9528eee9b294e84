"""What each ``flare`` sub-command does (``cmd_*``): the same functions as the dashboard, from a shell.

Every command that reports results takes ``--json``; every command takes ``--runs-dir`` (or reads
``$FLARE_RUNS_DIR``) to choose the run store.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.cli.model_commands import budget_models, budget_result
from flare_core.store.atomic import to_json
from flare_core.store.runs import RunStore
from flare_core.view.verdict import models_chosen_words

#: ``--max-dims`` left out: the estimator preset's whitened width (not a string, so argparse keeps it)
PRESET_WIDTH = object()


def _store(args: argparse.Namespace) -> RunStore:
    return RunStore(args.runs_dir)


def _print_json(obj: Any) -> None:
    print(to_json(obj))


def _table(frame: pd.DataFrame, floatfmt: str = "{:.4g}") -> str:
    if frame.empty:
        return "(empty)"
    from flare_core.view.results import shown_blank

    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    return shown_blank(shown).to_string(index=False)


# -- run ----------------------------------------------------------------------------------------------------


def _parse_embeddings(values: Sequence[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--embeddings expects NAME=PATH (a .npy or .parquet file), got {value!r}")
        found[name] = Path(path)
    return found


def _names(value: str | None) -> list[str]:
    """The comma-separated names of an option, blanks dropped."""
    return [m.strip() for m in value.split(",") if m.strip()] if value else []


def _judgements(args: argparse.Namespace, corpus: Any) -> pd.DataFrame | None:
    """The search judgements of ``--qrels`` on ``corpus``'s texts, checked (None without ``--qrels``)."""
    if args.qrels is None:
        if args.queries is not None or args.doc_id_col is not None:
            raise ValueError(
                "--queries and --doc-id-col describe the judgements of --qrels: give --qrels too"
            )
        return None
    if args.pair_cols:
        raise ValueError("give either --pair-cols or --qrels, not both")
    from flare_core.data.judgements import document_ids, load_judgements

    doc_ids = document_ids(args.corpus, corpus, args.doc_id_col)
    return load_judgements(args.qrels, doc_ids, queries=args.queries)


def cmd_run(args: argparse.Namespace) -> int:
    from flare_core.data.corpus import AUTO, load_corpus
    from flare_core.encoders import load_precomputed
    from flare_core.run import jobs
    from flare_core.run.create import corpus_notes, create_run
    from flare_core.run.params import build_params

    pair_columns = tuple(args.pair_cols.split(",")) if args.pair_cols else AUTO
    if pair_columns is not AUTO and len(pair_columns) not in (2, 3):
        raise ValueError("--pair-cols expects text_a,text_b,score (STS) or query,document (retrieval)")
    if args.qrels is not None:  # the judgements say which documents answer which query
        pair_columns = None
    corpus = load_corpus(
        args.corpus,
        text_column=args.text_col,
        label_column=None if args.no_labels else (args.label_col or AUTO),
        pair_columns=pair_columns,
        drop_duplicates=args.drop_duplicates,
        max_rows=args.max_rows,
        seed=args.seed,
    )
    judgements = _judgements(args, corpus)
    for line in corpus_notes(corpus):
        print(line, file=sys.stderr)
    precomputed = {
        name: load_precomputed(path, n_rows=len(corpus), name=name)
        for name, path in _parse_embeddings(args.embeddings).items()
    }
    models = budget_models(_names(args.models), args)
    if not models and not precomputed:
        raise ValueError("choose at least one model with --models or --embeddings")
    params = build_params(
        models=models,
        estimator=args.estimator,
        references=_names(args.references),
        controls=[] if args.controls.strip().lower() == "none" else _names(args.controls),
        **({} if args.max_dims is PRESET_WIDTH else {"max_dims": args.max_dims}),
        collapse=not args.no_collapse,
        flow_preset=args.flow_preset,
        max_texts_sufficiency=args.max_texts_sufficiency,
        collapse_texts=args.collapse_texts,
        seed=args.seed,
        device=args.device,
        executor=args.executor,
        ray_address=args.ray_address,
        workers=args.workers,
        autocast=args.autocast,
        batch_conditionals=args.batch_conditionals,
        use=args.use,
        tolerance_points=args.tolerance_points,
    )
    run = create_run(
        _store(args), corpus, params, name=args.name, precomputed=precomputed, judgements=judgements
    )
    print(f"run {run.id}: {len(corpus)} texts, {models_chosen_words(run.manifest)}", file=sys.stderr)
    position = None
    if args.background:
        submitted = jobs.submit(_store(args), run.id)
        print(submitted["message"], file=sys.stderr)
        status, position = "queued", submitted["position"]
    else:
        status = jobs.run_in_process(run, progress_bar=not args.json)
    manifest = run.manifest
    if args.json:
        _print_json(
            {"run_id": run.id, "status": status, "queue_position": position, "error": manifest.get("error")}
        )
    else:
        failed = [m for m in manifest["models"] if m.get("status") == "failed"]
        for model in failed:
            print(f"model {model['id']} failed: {model.get('error')}", file=sys.stderr)
        if status == "failed":
            print(f"run failed: {manifest.get('error')}", file=sys.stderr)
        _print_problems(manifest)
        print(run.id)
    return 0 if status in ("done", "queued") else 1


def _print_problems(manifest: dict[str, Any]) -> None:
    """One line on stderr per stage that failed in a run that is otherwise done."""
    from flare_core.run.outcomes import problem_sentences

    for sentence in problem_sentences(manifest):
        print(f"done, with a problem: {sentence}", file=sys.stderr)


def cmd_resume(args: argparse.Namespace) -> int:
    from flare_core.run import jobs
    from flare_core.run.outcomes import problems
    from flare_core.store import doctor

    run = _store(args).get(args.run_id)
    if run.status == "done" and not problems(run.manifest):
        if not any(f.kind == "damaged" for f in doctor.check_run(run.path)):
            print(f"run {run.id} is already done", file=sys.stderr)
            if args.json:
                _print_json({"run_id": run.id, "status": "done", "error": None, "repairs": []})
            return 0
        print(f"run {run.id} has damaged files: computing them again", file=sys.stderr)
    if run.cancel_requested():
        run.artefact("cancel.requested").unlink(missing_ok=True)
    if args.background:
        submitted = jobs.submit(_store(args), run.id)
        print(submitted["message"], file=sys.stderr)
        if args.json:
            _print_json({"run_id": run.id, "status": "queued", "queue_position": submitted["position"]})
        else:
            print(run.id)
        return 0
    before = len(run.manifest.get("repairs", []))
    status = jobs.run_in_process(run, progress_bar=not args.json)
    manifest = run.manifest
    repairs = manifest.get("repairs", [])[before:]
    for line in repairs:
        print(line, file=sys.stderr)
    if args.json:
        _print_json({"run_id": run.id, "status": status, "error": manifest.get("error"), "repairs": repairs})
    else:
        if status == "failed":
            print(f"run failed: {manifest.get('error')}", file=sys.stderr)
        _print_problems(manifest)
        print(run.id)
    return 0 if status == "done" else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check one run or the whole store (and the cache's temporary token stores) for damaged files,
    leftovers and stale locks; repair what it can."""
    from flare_core.run import token_stages
    from flare_core.store import doctor

    store = _store(args)
    if args.run_id:
        store.get(args.run_id)  # RunNotFound for an unknown id
        results = {args.run_id: doctor.check_run(store.root / args.run_id)}
    else:
        results = doctor.check_store(store)
    scratch = [] if args.run_id else token_stages.check_scratch()
    repaired: list[str] = []
    if args.repair:
        for run_id, findings in results.items():
            repaired += doctor.set_aside(store, run_id, findings)
        repaired += token_stages.remove_scratch(scratch)
    damaged = [f for findings in results.values() for f in findings if f.kind == "damaged"]
    if args.json:
        _print_json(
            {
                "checked": len(results),
                "sound": sorted(r for r, f in results.items() if not f),
                "findings": [f.as_dict() for fs in results.values() for f in fs],
                "scratch": [f.as_dict() for f in scratch],
                "repaired": repaired,
            }
        )
    else:
        for run_id, findings in results.items():
            if not findings:
                print(f"{run_id}: ok")
            for finding in findings:
                print(f"{run_id}: {finding.kind}: {finding.message}")
        for finding in scratch:
            print(f"cache: {finding.kind}: {finding.message}")
        for line in repaired:
            print(f"repaired: {line}")
        if not results:
            print(f"no runs in {store.root}")
        print(
            f"{len(results)} checked, {sum(1 for f in results.values() if not f)} sound, "
            f"{len(damaged)} damaged files",
            file=sys.stderr,
        )
    damaged += scratch
    return 1 if damaged and not (args.repair and all(f.recomputable for f in damaged)) else 0


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


def cmd_runs(args: argparse.Namespace) -> int:
    from flare_core.run import jobs
    from flare_core.view.results import runs_table

    jobs.dispatch(_store(args))  # a slot freed by a worker that died is filled now
    rows = runs_table(_store(args))
    for _run_id, message in _store(args).unreadable():
        print(f"warning: {message}", file=sys.stderr)
    waiting = jobs.waiting_runs(_store(args))
    for row in rows:
        if row["id"] in waiting:
            row["stage"] = f"waiting in the queue, position {waiting.index(row['id']) + 1}"
    if args.json:
        _print_json(rows)
    elif not rows:
        print(f"no runs in {_store(args).root}")
    else:
        print(_table(pd.DataFrame(rows)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from flare_core.answer.labels import load_labels
    from flare_core.view.results import run_results
    from flare_core.view.verdict import labels_given_words, map_drawing_words

    run = _store(args).get(args.run_id)
    results = run_results(run)
    budget = budget_result(run, args)
    manifest = results["manifest"]
    corpus = manifest["corpus"]
    given = load_labels(run)
    labels = {
        "column": corpus.get("label_column") if corpus.get("has_labels") else None,
        "given": len(given.rows),
        "batches": given.batches,
        "skipped": len(given.skipped_rows),
        "per_category": given.counts(),
        "words": labels_given_words(corpus, given.entries, results.get("search_judged")),
    }
    if args.json:
        _print_json(results | {"labels": labels} | ({} if budget is None else {"budget": budget}))
        return 0
    print(f"run {manifest['id']} ({manifest.get('name')}): {results['status_words']}")
    print(f"corpus: {corpus['source_name']}, {corpus['n_texts']} texts, labels: {labels['words']}")
    if manifest.get("error"):
        print(f"error: {manifest['error']}")
    for problem in results["problems"]:
        print(f"problem: {problem['what']} failed: {problem['why']}. To fix it, {problem['todo']}.")
    for model in manifest["models"]:
        extra = f" ({model.get('error')})" if model.get("status") == "failed" else ""
        print(
            f"  {model['id']:<28} {model.get('role', ''):<10} {model.get('status', ''):<8} "
            f"dim={model.get('dim')}{extra}"
        )
    if results.get("verdict"):
        print()
        print(results["verdict"]["text"])
    drawing = map_drawing_words(manifest, results["status"], answered=bool(results.get("verdict")))
    if drawing:
        print(drawing.replace("Check with a few labels", f"`flare label {run.id} --next 16`"))
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
    if budget is not None:
        print(f"\n{budget['sentence']}")
        for model, why in budget["left_out"].items():
            print(f"  outside the budget: {model} ({why})")
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
    from flare_core.answer.stored import load_verdict
    from flare_core.run.params import RunParams
    from flare_core.run.summary import summarise
    from flare_core.run.validation_stage import run_studies

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
                "verdict": load_verdict(run),
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
    verdict = load_verdict(run)
    if verdict is not None:
        print("\n" + verdict["text"])
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
    from flare_core.run.create import import_bundle

    run = import_bundle(_store(args), args.bundle, run_id=args.run_id)
    print(run.id)
    return 0


# -- benchmark ---------------------------------------------------------------------------------------------


def cmd_benchmark(args: argparse.Namespace) -> int:
    from flare_core.benchmark import report as benchmark_report
    from flare_core.benchmark import suite as benchmark

    benchmark_report.docs_markers(args.docs_section)  # a bad name is refused before any work
    store = _store(args)
    if args.stage == "answer":
        from flare_core.benchmark.answer_suite import markdown_tables, update_docs
        from flare_core.cli.benchmark_commands import answer_benchmark

        result = answer_benchmark(
            store, _names(args.corpora), _names(args.models), rejudge=args.rejudge, table_only=args.table_only
        )
        if args.docs is not None:
            update_docs(args.docs, result)
        print(to_json(result) if args.json else markdown_tables(result))
        return 0

    def progress(message: str) -> None:
        print(message, file=sys.stderr)

    if args.kept:
        from flare_core.cli.benchmark_commands import kept_map_command

        return kept_map_command(store, args, progress)
    if args.rejudge:
        result = benchmark.rejudge_benchmark(store, progress=progress)
    elif args.table_only:
        result = benchmark.load_benchmark(store)
        if result is None:
            raise FileNotFoundError(
                f"no benchmark in {benchmark.benchmark_dir(store)}; run `flare benchmark` first"
            )
    else:
        result = benchmark.run_benchmark(
            store,
            _names(args.corpora) or None,
            models=_names(args.models) or None,
            max_texts=args.max_texts,
            flow_preset=args.flow_preset,
            progress=progress,
            add=args.add,
        )
    if args.docs is not None:
        benchmark_report.update_docs(args.docs, result, args.docs_section)
    if args.json:
        _print_json(result)
    else:
        print(benchmark_report.markdown_table(result))
    return 0


# -- app / demo ---------------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from flare_core.run.demo import ensure_demo_run

    run_id = ensure_demo_run(_store(args), background=args.background)
    print(run_id)
    return 0
