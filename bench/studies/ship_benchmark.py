"""Join stored benchmarks made with the same models and parameters into the one the package ships.

Usage::

    python bench/studies/ship_benchmark.py BENCHMARK.json [BENCHMARK.json ...] [--out PATH] [--compare]

Each argument is a ``benchmark.json`` of ``flare benchmark`` (for example the six labelled corpora's and
the three search corpora's, run into two stores). Their corpus records are joined in the order given,
a corpus named twice is refused, and the summary (every score's ρ, the label-free rule of each use
chosen leave one corpus out, what each ground of the answer lost) is computed again from the joined
records by :func:`flare_core.benchmark.suite.summarise`. Benchmarks of other parameters are refused: their
figures would not describe one product. A later benchmark may judge fewer models than the first (the
search corpora were run on the first eight candidates of the sixteen): each corpus record names the
candidates it was judged on, and each corpus's figures are of those; one with a model the first lacks
is refused. ``--out`` (default: the shipped
``flare_core/benchmark/benchmark_results.json``) is written; ``--compare`` prints, per use, the rule
and the points lost before (the first file's own summary) and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer.shipped import SHIPPED_RESULTS  # noqa: E402
from flare_core.benchmark.suite import summarise  # noqa: E402
from flare_core.store import atomic  # noqa: E402

#: Parameters recorded only by newer benchmarks; they do not change a run's figures.
_BOOKKEEPING = {"label_draws", "use"}


def joined(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One benchmark of every record of ``results`` (same models and run parameters), summarised again."""
    first = results[0]
    params = {k: v for k, v in first["params"].items() if k not in _BOOKKEEPING}
    records: list[dict[str, Any]] = []
    for result in results:
        other = {k: v for k, v in result["params"].items() if k not in _BOOKKEEPING}
        if other != params:
            raise SystemExit("the benchmarks were made with other parameters: not joined")
        if not set(result["models"]) <= set(first["models"]):
            raise SystemExit(
                "a benchmark judged models the first one did not "
                f"({sorted(set(result['models']) - set(first['models']))}): not joined"
            )
        for record in result["corpora"]:
            if any(r["corpus"] == record["corpus"] for r in records):
                raise SystemExit(f"{record['corpus']} is in two of the benchmarks")
            records.append(record)
    return {
        **first,
        "corpora": records,
        "summary": summarise(records),
        "complete": all(r.get("complete", True) for r in results),
        "created": max(r["created"] for r in results),
    }


def _rules(result: dict[str, Any]) -> dict[str, str]:
    """Per use: the rule chosen on every corpus, the cases judged, and the points lost (mean / worst) by a
    rule chosen on the other corpora."""
    out = {}
    for use, row in result["summary"]["label_free"].items():
        mean, worst = row.get("mean_lost"), row.get("worst_lost")
        lost = "–" if mean is None else f"{mean:.1f} / {worst:.1f}"
        out[use] = f"{row.get('final')} on {row.get('cases')} cases, lost {lost}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=SHIPPED_RESULTS)
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    results = [json.loads(p.read_text(encoding="utf-8")) for p in args.benchmarks]
    result = joined(results)
    if args.compare:
        before, after = _rules(results[0]), _rules(result)
        for use in after:
            print(f"{use:11s} before {before.get(use)}  after {after[use]}")
    atomic.write_json(args.out, result)
    print(f"{len(result['corpora'])} corpora written to {args.out}")


if __name__ == "__main__":
    main()
