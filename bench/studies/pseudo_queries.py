"""Study: label-free scores that read the corpus (pseudo-queries, halves, neighbourhood agreement), judged
on the answer benchmark's kept corpora exactly as the answer stage judges its geometric rules.

For every kept corpus that is complete (``<root>/<corpus>/record.json``), the candidates' probe scores
(:mod:`bench.studies.draws.probe_scores`) are computed once and kept under ``--probes``; a rerun reads
them. Then, per use (search on the retrieval corpora, classifier on the classification corpora, not sure
on both), it prints:

- each score's mean Spearman correlation with the use's oracle, with a 95% interval from resampling the
  corpora (as the answer benchmark's score table);
- the rule chosen leave one corpus out among the geometric rules alone, and among them with the new
  scores and their combinations with the effective rank (the mean of the two ranks), with the points
  each corpus lost;
- each score's cost: the seconds the candidates took to embed the pseudo-queries and halves.

Usage::

    nice -n 5 .venv/bin/python bench/studies/pseudo_queries.py --compute [--wait-until 20:10]
    .venv/bin/python bench/studies/pseudo_queries.py [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.studies.draws.probe_scores import PROBE_COLUMNS, probe_scores
from bench.studies.draws.pseudo_scores import SAMPLE
from flare_core.answer.label_free import benchmark_cases
from flare_core.benchmark.answer_suite import GEOMETRIC_RULES, score_rows
from flare_core.choosing.label_free_rules import leave_one_corpus_out, rule_table
from flare_core.data.benchmark_corpora import load_benchmark_corpus

ROOT = "/work/bench-runs/benchmark/embeddings"
PROBES = "/work/bench-runs/benchmark/probes"
SHIPPED = Path(__file__).resolve().parents[2] / "flare_core" / "benchmark" / "answer_benchmark.json"
SEARCH = (
    "chatbot-questions",
    "data-science-faq",
    "semanlink-tags",
    "squad-paragraphs",
    "aia-bde-faq",
    "swedish-build-faq",
)
#: The new rules judged beside the geometric ones.
NEW_RULES = (
    "pseudo_ndcg",
    "pseudo_mrr",
    "pseudo_ndcg_sample",
    "pseudo_fused",
    "halves",
    "neighbours",
    "rank_and_pseudo",
    "rank_and_sample",
    "rank_and_fused",
    "rank_and_halves",
    "rank_and_neighbours",
)


def complete(root: str) -> list[str]:
    """The kept corpora whose record is written, search corpora first."""
    done = sorted(p.parent.name for p in Path(root).glob("*/record.json"))
    return [c for c in SEARCH if c in done] + [c for c in done if c not in SEARCH]


def shipped_records() -> dict[str, dict]:
    """The shipped answer benchmark's records, by corpus."""
    return {r["corpus"]: r for r in json.loads(SHIPPED.read_text(encoding="utf-8"))["corpora"]}


def record_of(root: str, corpus: str) -> dict:
    """The kept record of ``corpus``, or the shipped one while it is not kept."""
    path = Path(root) / corpus / "record.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else shipped_records()[corpus]


def _pending(root: str, probes: str) -> list[str]:
    """The corpora not probed yet (or probed before their vectors were kept), the search corpora first."""
    out = []
    for corpus in list(SEARCH) + [c for c in complete(root) if c not in SEARCH]:
        kept = (Path(root) / corpus / "record.json").is_file()
        path = Path(probes) / corpus / "scores.json"
        done = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        if (
            done
            and done.get("kept", True) == kept
            and all(set(PROBE_COLUMNS) <= set(v) for v in done["scores"].values())
        ):
            continue
        if record_of(root, corpus)["oracle"] != "sts_spearman":
            out.append(corpus)
    return out


def compute(root: str, probes: str, until: dt.datetime | None, sample: int, sample_other: int) -> None:
    """Probe every search corpus (from its texts while its vectors are not kept; again once they are) and
    every complete corpus once, a search corpus first; with ``until``, wait for the search corpora until
    then. ``sample``: pseudo-queries per search corpus; ``sample_other``: per other corpus."""
    while True:
        pending = _pending(root, probes)
        if pending:
            corpus = pending[0]
            kept = (Path(root) / corpus / "record.json").is_file()
            texts = None if kept else load_benchmark_corpus(corpus, seed=0).frame["text"].astype(str).tolist()
            models = record_of(root, corpus)["candidates"]
            size = sample if corpus in SEARCH else sample_other
            probe_scores(
                root, probes, corpus, models, texts=texts, sample=size, log=lambda s: print(s, flush=True)
            )
            print(f"{corpus}: done", flush=True)
            continue
        waiting = [c for c in SEARCH if c not in complete(root)]
        if not waiting or until is None or dt.datetime.now(dt.UTC) > until:
            return
        time.sleep(60)


def records_with_probes(root: str, probes: str) -> list[dict]:
    """The probed corpora's records (kept, or shipped while not kept), each table row with its probe scores."""
    records = []
    for corpus in list(SEARCH) + [c for c in complete(root) if c not in SEARCH]:
        path = Path(probes) / corpus / "scores.json"
        if not path.is_file():
            continue
        record = record_of(root, corpus)
        scores = json.loads(path.read_text(encoding="utf-8"))["scores"]
        record["table"] = [{**row, **scores.get(row["model"], {})} for row in record["table"]]
        records.append(record)
    return records


def judged(records: list[dict], use: str) -> dict:
    """Per use: the score rows, the rule chosen leave one corpus out without and with the new scores."""
    cases = benchmark_cases(records, use)
    if not cases:
        return {}
    before = leave_one_corpus_out(cases, GEOMETRIC_RULES)
    singles = rule_table(cases, GEOMETRIC_RULES + NEW_RULES)
    # only the rules that score every corpus compete: one that cannot score a corpus would drop it
    every = [rule for rule in NEW_RULES if (singles["rule"].eq(rule) & singles["cases"].eq(len(cases))).any()]
    after = leave_one_corpus_out(cases, GEOMETRIC_RULES + tuple(every))
    scored = ("dim", "effective_rank", "uniformity", *PROBE_COLUMNS)
    return {
        "scores": score_rows(cases, use, 0, scored),
        "before": before,
        "after": after,
        "singles": singles.to_dict(orient="records"),
    }


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table (numbers to 3 figures)."""

    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + " --- |" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def losses(block: dict) -> str:
    """The leave-one-corpus-out rule's mean and worst points lost and share within 2, before and after."""
    parts = []
    for name in ("before", "after"):
        loco = block[name]
        if loco["mean_lost"] is None:
            parts.append(f"{name}: none")
            continue
        lost = pd.DataFrame(loco["rows"])["lost"].dropna()
        parts.append(
            f"{name}: chosen on all {loco['final']}, mean {loco['mean_lost']:.2f}, worst {loco['worst_lost']:.2f}, "
            f"within 2 points {(lost <= 2 + 1e-9).mean():.0%}"
        )
    return "; ".join(parts)


def cost(root: str, probes: str) -> pd.DataFrame:
    """Per corpus probed: the texts it has, the texts cut (sentence and rest, or halves), the candidates'
    summed seconds to embed the cut texts, and to embed the corpus itself (as kept, the same shared cores)."""
    rows = []
    for path in sorted(Path(probes).glob("*/scores.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        record = record_of(root, data["corpus"])
        table = pd.DataFrame(record["table"]).set_index("model").loc[record["candidates"]]
        kinds = ", ".join(f"{n} {kind}" for kind, n in data["kinds"].items())
        rows.append(
            {
                "corpus": data["corpus"],
                "texts": record["n_texts"],
                "pseudo-queries": f"{data['n_queries']} ({kinds})",
                "halves": data["n_halves"],
                "probe s": float(np.nansum(list(data["seconds"].values()))),
                "corpus s": float(table["embed_seconds"].astype(float).sum()),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--probes", default=PROBES)
    parser.add_argument("--compute", action="store_true", help="probe every complete corpus not probed yet")
    parser.add_argument(
        "--wait-until", default=None, help="HH:MM UTC: wait for the search corpora until then"
    )
    parser.add_argument("--sample", type=int, default=SAMPLE, help="pseudo-queries (and halves) per corpus")
    parser.add_argument("--sample-other", type=int, default=SAMPLE, help="per classification corpus")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.compute:
        until = None
        if args.wait_until:
            hour, minute = (int(x) for x in args.wait_until.split(":"))
            until = dt.datetime.now(dt.UTC).replace(hour=hour, minute=minute, second=0)
        compute(args.root, args.probes, until, args.sample, args.sample_other)
        return 0
    records = records_with_probes(args.root, args.probes)
    out = {use: judged(records, use) for use in ("search", "classifier", "unsure")}
    for use, block in out.items():
        if not block:
            continue
        print(f"\n## {use} ({len(benchmark_cases(records, use))} corpora)\n")
        print(markdown(pd.DataFrame(block["scores"]).drop(columns="use")))
        print("\neach rule alone (the same rule on every corpus):")
        print(markdown(pd.DataFrame(block["singles"])))
        print(f"\nleave one corpus out: {losses(block)}")
        if all(block[name]["rows"] for name in ("before", "after")):
            rows = [
                pd.DataFrame(block[name]["rows"]).set_index("case")[["rule", "lost"]]
                for name in ("before", "after")
            ]
            before, after = (
                r.add_suffix(f" {name}") for r, name in zip(rows, ("before", "after"), strict=True)
            )
            print(markdown(before.join(after, how="outer").reset_index()))
    print("\ncost (candidates' seconds to embed the cut texts, 2 shared cores):")
    print(markdown(cost(args.root, args.probes)))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
