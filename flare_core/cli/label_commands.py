"""``flare label``: label a few texts of a run in a spreadsheet, and read the labels back.

    flare label RUN_ID --next 16 [-o todo.csv]     the texts the product wants labelled next (row,text,label)
    flare label RUN_ID labels.csv                  read the labels back (columns row and label)
    flare label RUN_ID --categories sport,politics name the categories (optional; a file names them too)
    flare label RUN_ID --rename old=new            rename a category, keeping its labels

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
    p.set_defaults(func=cmd_label)


def _labelable(run: Run) -> None:
    if run.manifest["corpus"].get("has_labels"):
        column = run.manifest["corpus"].get("label_column")
        raise ValueError(
            f"run {run.id} has labels of its own (column {column!r}): its answer already comes from them"
        )


def cmd_label(args: argparse.Namespace) -> int:
    from flare_core.answer import labels as label_store
    from flare_core.answer.from_labels import next_texts
    from flare_core.answer.write import write_verdict

    run = RunStore(args.runs_dir).get(args.run_id)
    _labelable(run)
    if args.next is not None and args.labels_file is not None:
        raise ValueError("give either a labels file to read or --next N to write, not both")
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
    if args.labels_file is not None:
        pairs = label_store.read_labels_file(
            args.labels_file.read_bytes(),
            name=args.labels_file.name,
            texts=run.corpus_frame()["text"].tolist(),
        )
        if not pairs:
            raise ValueError(f"{args.labels_file.name} has no label to read (every label cell is blank)")
        saved = label_store.add_labels(run, pairs, source="file")
        print(f"{len(pairs)} labels read; {len(saved.latest())} texts labelled in all", file=sys.stderr)
    verdict = write_verdict(run)
    if args.json:
        print(json.dumps(verdict, indent=2, ensure_ascii=False, default=str))
    else:
        print(verdict["text"])
    return 0


def _write_todo(todo: pd.DataFrame, output: Path | None) -> int:
    from flare_core.store import atomic
    from flare_core.store.export import safe_csv

    data = safe_csv(todo[["row", "text", "label"]])
    if output is None:
        sys.stdout.write(data.decode("utf-8"))
    else:
        atomic.write_bytes(output, data)
        print(f"{len(todo)} texts to label written to {output}", file=sys.stderr)
    return 0
