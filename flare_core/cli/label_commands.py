"""``flare label``: label a few texts of a run in a spreadsheet, or judge a few search queries, and read the
labels or judgements back.

    flare label RUN_ID --next 16 [-o todo.csv]     the texts the product wants labelled next (row,text,label)
    flare label RUN_ID labels.csv                  read the labels back (columns row and label)
    flare label RUN_ID --categories sport,politics name the categories (optional; a file names them too)
    flare label RUN_ID --rename old=new            rename a category, keeping its labels
    flare label RUN_ID --correct 12=sport          correct a saved label (repeatable); a labels file that
                                                   gives a labelled text another label corrects it too

For search (:mod:`flare_core.answer.few_judgements`):

    flare label RUN_ID --query "reset my password"  add a query of your own (repeat --query for more)
    flare label RUN_ID --next-queries 5 [-o todo.csv] [--all-documents]
                                                   the queries to judge next (yours first, then queries
                                                   drafted from the corpus) with the documents the models rank
                                                   highest (at most 15 a query; --all-documents: every one
                                                   pooled), one row each: query_id,query,doc_row,text,relevant
    flare label RUN_ID judged.csv                  read the judgements back (relevant: 1 or 0; blank: not
                                                   judged); ``--judgements judged.csv`` says so explicitly

Each way prints the updated answer, as ``flare show`` does (``--json``: the verdict).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.store.runs import Run, RunStore


def add_label_parser(sub: Any, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "label",
        parents=[common, as_json],
        help="label a few texts of a run (a CSV in and out) to settle the answer",
    )
    p.add_argument("run_id")
    p.add_argument(
        "labels_file", nargs="?", type=Path, help="CSV with the columns row and label (others ignored)"
    )
    p.add_argument("--next", type=int, default=None, metavar="N", help="write the N texts to label next")
    p.add_argument(
        "-o", "--output", type=Path, default=None, help="where --next writes its CSV (default: stdout)"
    )
    p.add_argument("--categories", default=None, help="comma-separated names of the categories")
    p.add_argument("--rename", default=None, metavar="OLD=NEW", help="rename a category, keeping its labels")
    p.add_argument(
        "--correct",
        action="append",
        default=None,
        metavar="ROW=CATEGORY",
        help="correct the saved label of a text (repeatable)",
    )
    p.add_argument(
        "--query",
        action="append",
        default=None,
        metavar="TEXT",
        help="add a search query to judge (repeatable)",
    )
    p.add_argument(
        "--next-queries",
        type=int,
        default=None,
        metavar="N",
        help="write N search queries to judge with their pooled documents "
        "(query_id,query,doc_row,text,relevant)",
    )
    p.add_argument(
        "--all-documents",
        action="store_true",
        help="with --next-queries: every pooled document of each query, not only the top 15",
    )
    p.add_argument(
        "--judgements",
        type=Path,
        default=None,
        metavar="FILE",
        help="read search judgements back (columns query_id, doc_row and relevant: 1 or 0)",
    )
    p.set_defaults(func=cmd_label)


def _labelable(run: Run) -> None:
    if run.manifest["corpus"].get("has_labels"):
        column = run.manifest["corpus"].get("label_column")
        raise ValueError(
            f"run {run.id} has labels of its own (column {column!r}): its answer already comes from them"
        )


def _is_judgements_file(path: Path) -> bool:
    """Whether a file given to ``flare label`` holds search judgements (a ``query_id`` column)."""
    from flare_core.data.reading import read_table
    from flare_core.errors import CorpusError

    try:
        frame, _ = read_table(path.read_bytes(), name=path.name, max_bytes=64 * 2**20)
    except CorpusError:
        return False  # read again as a labels file, which says what is wrong
    return "query_id" in {str(c).strip().lower() for c in frame.columns}


def _search(run: Run, args: argparse.Namespace) -> int | None:
    """``--query``, ``--next-queries`` and judgements files; None when none was asked for."""
    from flare_core.answer import few_judgements as fj
    from flare_core.answer import from_judgements
    from flare_core.data.judgements import JUDGEMENTS

    judgements = args.judgements
    if not (args.query or args.next_queries is not None or judgements is not None):
        return None
    if run.has(JUDGEMENTS) or run.has("pairs.parquet"):
        raise ValueError(
            f"run {run.id} has search judgements or pairs of its own: its answer already comes from them"
        )
    if args.next_queries is not None and judgements is not None:
        raise ValueError("give either a judgements file to read or --next-queries N to write, not both")
    if args.query:
        ids = fj.add_queries(run, args.query, source="typed")
        print(
            f"{len(set(ids))} quer{'y' if len(set(ids)) == 1 else 'ies'} to judge: {', '.join(ids)}",
            file=sys.stderr,
        )
    if args.next_queries is not None:
        ids = from_judgements.next_queries(run, args.next_queries)
        if not ids:
            raise ValueError(
                "no query is left to judge and none could be drafted from the corpus: add one with --query"
            )
        todo = fj.pooled_documents(run, ids, every=args.all_documents)
        return _write_todo(
            todo,
            args.output,
            ["query_id", "query", "doc_row", "text", "relevant"],
            f"{len(ids)} queries ({len(todo)} documents) to judge",
        )
    if judgements is not None:
        judged = fj.load_search_judgements(run)
        given = fj.read_judgements_file(
            judgements.read_bytes(),
            name=judgements.name,
            judged=judged,
            texts=run.corpus_frame()["text"].tolist(),
        )
        if not given:
            raise ValueError(f"{judgements.name} has no judgement to read (every relevant cell is blank)")
        saved = fj.add_judgements(run, given, source="file")
        print(
            f"{len(given)} judgements read; {len(saved.judged)} queries judged in all, {len(saved.counted)} "
            "with a relevant document",
            file=sys.stderr,
        )
        for query in saved.no_relevant:
            print(
                f"query {query} has no document marked relevant: it is kept, but does not count until one is",
                file=sys.stderr,
            )
    return None


def cmd_label(args: argparse.Namespace) -> int:
    from flare_core.answer import labels as label_store
    from flare_core.answer.from_labels import next_texts
    from flare_core.answer.labels_file import read_labels_file
    from flare_core.answer.write import write_verdict

    run = RunStore(args.runs_dir).get(args.run_id)
    _labelable(run)
    if args.next is not None and args.labels_file is not None:
        raise ValueError("give either a labels file to read or --next N to write, not both")
    if args.judgements is None and args.labels_file is not None and _is_judgements_file(args.labels_file):
        args.judgements, args.labels_file = args.labels_file, None
    searched = _search(run, args)
    if searched is not None:
        return searched
    if args.categories:
        label_store.set_categories(run, [c for c in args.categories.split(",") if c.strip()])
    if args.rename:
        old, sep, new = args.rename.partition("=")
        if not sep:
            raise ValueError(f"--rename expects OLD=NEW, got {args.rename!r}")
        label_store.rename_category(run, old.strip(), new)
    if args.next is not None:
        todo = next_texts(run, label_store.load_labels(run), args.next).assign(label="")
        return _write_todo(todo, args.output)
    if args.correct:
        _say(label_store.save_batch(run, _corrections(run, args.correct), source="cli"))
    if args.labels_file is not None:
        notes: list[str] = []
        pairs = read_labels_file(
            args.labels_file.read_bytes(),
            name=args.labels_file.name,
            texts=run.corpus_frame()["text"].tolist(),
            notes=notes,
        )
        for note in notes:
            print(note, file=sys.stderr)
        if not pairs:
            raise ValueError(f"{args.labels_file.name} has no label to read (every label cell is blank)")
        skipped = [row for row, label in pairs if label == label_store.SKIP]
        given = [(row, label) for row, label in pairs if label != label_store.SKIP]
        saved = _say(label_store.save_batch(run, given, skipped=skipped, source="file"))
        print(
            f"{len(given)} labels read ({saved.added} new, {len(saved.corrected)} corrected), {len(skipped)} "
            f"texts set aside; {len(saved.labels.latest())} texts labelled in all",
            file=sys.stderr,
        )
    verdict = write_verdict(run)
    if args.json:
        print(json.dumps(verdict, indent=2, ensure_ascii=False, default=str))
    else:
        print(verdict["text"])
    return 0


def _corrections(run: Run, given: list[str]) -> list[tuple[int, str]]:
    """``--correct ROW=CATEGORY`` arguments as pairs; a row that has no saved label is refused."""
    from flare_core.answer import labels as label_store

    latest = label_store.load_labels(run).latest()
    pairs = []
    for item in given:
        row, sep, label = item.partition("=")
        number = label_store.row_number(row)
        if not sep or number is None:
            raise ValueError(f"--correct expects ROW=CATEGORY (such as 12=sport), got {item!r}")
        if number not in latest:
            raise ValueError(f"row {number:,} has no saved label to correct: label it in a batch first")
        pairs.append((number, label))
    return pairs


def _say(saved: Any) -> Any:
    """Print what a saved batch must tell (corrections, names mapped, labels not saved); returns it."""
    for note in saved.notes():
        print(note, file=sys.stderr)
    return saved


def _write_todo(
    todo: pd.DataFrame, output: Path | None, columns: list[str] | None = None, what: str | None = None
) -> int:
    from flare_core.store import atomic
    from flare_core.store.export import safe_csv

    data = safe_csv(todo[columns or ["row", "text", "label"]])
    if output is None:
        sys.stdout.write(data.decode("utf-8"))
    else:
        atomic.write_bytes(output, data)
        print(f"{what or f'{len(todo)} texts to label'} written to {output}", file=sys.stderr)
    return 0
