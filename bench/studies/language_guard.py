"""The language guard on the answer benchmark's corpora, before and after the per-text language reading:
for each corpus of the shipped answer benchmark (``flare_core/benchmark/answer_benchmark.json``), the
writing its record holds and the models it set aside (read by the common-word count of the first 2,000
texts), beside the languages and scripts :func:`flare_core.data.language.read_writing` finds now in the
same texts (``load_benchmark_corpus(name)``, seed 0) and the models it sets aside (those reading under
:data:`~flare_core.data.language.READ_SHARE` of the texts). Nothing is written to the records.

Prints one row per corpus and the seconds each reading took; ``--json`` writes every figure.

    PYTHONPATH=. .venv/bin/python bench/studies/language_guard.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer.shipped import shipped_answer_results  # noqa: E402
from flare_core.data.benchmark_corpora import load_benchmark_corpus  # noqa: E402
from flare_core.data.language import READ_SHARE  # noqa: E402
from flare_core.encoders.registry import reads_corpus  # noqa: E402


def _short(models: list[str], candidates: list[str]) -> str:
    """The candidates among ``models`` (controls and partial models left out), or "none"."""
    kept = [m for m in models if m in candidates]
    return f"{len(kept)}: " + ", ".join(kept) if kept else "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    shipped = shipped_answer_results()
    rows = []
    for record in shipped["corpora"]:
        models = [row["model"] for row in record["table"]]
        before = [row["model"] for row in record["table"] if row.get("reads_corpus") == 0]
        texts = load_benchmark_corpus(record["corpus"]).frame["text"].astype(str).tolist()
        start = time.perf_counter()
        writing, shares = reads_corpus(models, texts)
        seconds = time.perf_counter() - start
        after = [m for m in models if shares[m] < READ_SHARE]
        rows.append(
            {
                "corpus": record["corpus"],
                "before": record.get("writing"),
                "set_aside_before": before,
                "after": writing.kind,
                "languages": writing.words(),
                "writing": writing.record(),
                "set_aside_after": after,
                "english_share": writing.english,
                "seconds": seconds,
            }
        )
        row = rows[-1]
        print(
            f"| {row['corpus']} | {row['before']} | {_short(before, record['candidates'])} | {row['after']} | "
            f"{row['languages'] or '(too short to tell)'} | "
            f"{'—' if writing.english is None else f'{writing.english:.3f}'} | "
            f"{_short(after, record['candidates'])} | {seconds:.2f} |",
            flush=True,
        )
    changed = [r["corpus"] for r in rows if sorted(r["set_aside_before"]) != sorted(r["set_aside_after"])]
    print(f"corpora whose set-aside models changed: {changed or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
