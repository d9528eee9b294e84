"""``flare benchmark --stage map --kept``: the information-sufficiency map of every kept corpus, estimated
from the answer benchmark's vectors (:mod:`flare_core.benchmark.map_kept`) and judged by each corpus's
oracle (:mod:`flare_core.benchmark.map_judge`).

Layout under the run store::

    <runs>/benchmark/embeddings/<corpus>/   the kept vectors and the answer record (the answer stage's)
    <runs>/benchmark/map/<corpus>/          the matrices, one folder per estimator
    <runs>/benchmark/map_kept.json          the records and summary (:func:`run_kept_map`)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.benchmark.map_judge import HEADLINE, is_rule_table, map_record, map_summary, without_fitted
from flare_core.benchmark.map_kept import MAP_ESTIMATORS, estimate_kept, read_stage
from flare_core.benchmark.report import fill_section
from flare_core.store import atomic

MAP_KEPT_VERSION = 1


def complete_corpora(root: str | Path) -> list[str]:
    """The corpora kept under ``root`` that the answer stage has judged (a ``record.json`` beside the
    vectors), sorted."""
    return sorted(p.parent.name for p in Path(root).glob("*/record.json"))


def run_kept_map(
    root: str | Path,
    out: str | Path,
    corpora: Sequence[str] | None = None,
    *,
    preset: str = "default",
    seed: int = 0,
    estimate: bool = True,
    add: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Estimate (unless ``estimate`` is False: only those already estimated are judged) and judge the map of
    ``corpora`` (default: every complete kept corpus) and write ``out/../map_kept.json``; returns it.
    ``add``: keep the stored record's other corpora. A corpus whose stages are finished is read back."""
    root, out = Path(root), Path(out)
    complete = complete_corpora(root)
    names = list(corpora) if corpora else complete
    missing = sorted(set(names) - set(complete))
    if missing:
        raise ValueError(
            f"no judged kept vectors of {missing} under {root}: run flare benchmark --stage answer first"
        )
    path = out.parent / "map_kept.json"
    stored = json.loads(path.read_text(encoding="utf-8")) if add and path.is_file() else None
    if stored is not None and stored.get("preset") != preset:
        raise ValueError(f"{path} holds the {stored.get('preset')!r} preset: add corpora with the same one")
    records = [r for r in (stored or {}).get("corpora", []) if r["corpus"] not in names]
    for name in names:
        start = time.perf_counter()
        for estimator in MAP_ESTIMATORS:
            if estimate:
                estimate_kept(root, name, out, estimator, preset=preset, seed=seed, log=log)
        if not any(read_stage(out, name, e) for e in MAP_ESTIMATORS):
            if log is not None:
                log(f"{name}: no finished map yet, left out")
            continue
        records.append(map_record(root, out, name))
        if log is not None:
            log(
                f"{name}: judged ({time.perf_counter() - start:.0f} s now, {records[-1]['seconds']:.0f} s "
                "of stages)"
            )
    result = {
        "version": MAP_KEPT_VERSION,
        "preset": preset,
        "seed": seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "corpora": records,
        "summary": map_summary(records, seed=seed),
        "pretrained": map_summary(without_fitted(records), seed=seed)["scores"],
        "rules": is_rule_table(records),
    }
    atomic.write_json(path, result)
    return result


def markdown_tables(result: dict[str, Any], scores: Sequence[str] = HEADLINE) -> str:
    """The kept map in Markdown: per use and score, the mean Spearman and points lost with their intervals;
    then per corpus the Spearman of the flows, the mixtures, effective rank and width for each use, and the
    seconds each estimator took."""
    summary = result["summary"]
    frame = pd.DataFrame(summary["scores"])
    lines = [
        f"Map from the kept vectors: {len(result['corpora'])} corpora, the {result['preset']} preset.",
        "",
    ]
    lines += [
        "| use | score | corpora | mean ρ | 95% interval | points lost | 95% interval | top is best |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in frame[frame["score"].isin(scores)].itertuples(index=False) if len(frame) else []:
        lines.append(
            f"| {row.use} | {row.score} | {row.corpora} | {row.mean_rho:.2f} | {row.rho_low:.2f} to "
            f"{row.rho_high:.2f} | {row.mean_lost:.1f} | {row.lost_low:.1f} to {row.lost_high:.1f} "
            f"| {row.top_is_best_on} |"
        )
    per = pd.DataFrame(summary["per_corpus"])
    shown = [s for s in ("flow", "gmm", "effective_rank", "dim") if len(per) and s in set(per["score"])]
    if shown:
        wide = per[per["score"].isin(shown)].pivot_table(
            index=["use", "corpus"], columns="score", values="rho"
        )
        lines += [
            "",
            "| use | corpus | " + " | ".join(f"ρ {s}" for s in shown) + " |",
            "| --- | --- | " + " | ".join("---" for _ in shown) + " |",
        ]
        for (use, corpus), row in wide.iterrows():
            cells = " | ".join("–" if pd.isna(row.get(s)) else f"{row[s]:.2f}" for s in shown)
            lines.append(f"| {use} | {corpus} | {cells} |")
    lines += [
        "",
        "| corpus | models | texts | mixtures: s | flows: s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for record in result["corpora"]:
        stages = record["stages"]
        took = [_stage_cost(stages[e]) if e in stages else "–" for e in ("gmm", "flow")]
        rows = next(iter(stages.values()))["n_rows"]
        lines.append(f"| {record['corpus']} | {len(record['table'])} | {rows:,} | {took[0]} | {took[1]} |")
    return "\n".join(
        lines + pretrained_lines(result.get("pretrained") or []) + rule_lines(result.get("rules") or [])
    )


def _stage_cost(stage: dict[str, Any]) -> str:
    """A stage's cost in the table: its units' seconds summed (one thread each, on this machine), or, where
    the units were not kept, the stage's wall seconds and the machine it ran on."""
    if stage.get("unit_seconds"):
        return f"{stage['unit_seconds']:.0f}"
    return f"{stage['seconds']:.0f} wall, {stage.get('machine', 'another machine')}"


def pretrained_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The mean ρ of the IS scores and the geometric ones over the pretrained candidates alone."""
    shown = [r for r in rows if r["score"] in ("flow", "gmm", "effective_rank", "dim")]
    if not shown:
        return []
    lines = [
        "",
        "Without the models fitted on the corpus (TF-IDF, doc2vec, fastText):",
        "",
        "| use | score | corpora | mean ρ | 95% interval | points lost |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in shown:
        lines.append(
            f"| {r['use']} | {r['score']} | {r['corpora']} | {r['mean_rho']:.2f} | {r['rho_low']:.2f} to "
            f"{r['rho_high']:.2f} | {r['mean_lost']:.1f} |"
        )
    return lines


def rule_lines(rules: Sequence[dict[str, Any]]) -> list[str]:
    """The label-free rule with and without information sufficiency, leave one corpus out, in Markdown."""
    if not rules:
        return []
    lines = [
        "",
        "| use | rules | corpora | chosen on all | mean lost | worst lost | geometric alone: chosen | mean "
        "lost | worst lost |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rules:
        lines.append(
            f"| {row['use']} | {row['rules']} | {row['cases']} | {row['final']} | {row['mean_lost']:.1f} "
            f"| {row['worst_lost']:.1f} | {row['alone_final']} | {row['alone_mean_lost']:.1f} "
            f"| {row['alone_worst_lost']:.1f} |"
        )
    return lines


#: The markers around the kept map's tables in a docs page.
DOCS_START, DOCS_END = "<!-- map-kept:start -->", "<!-- map-kept:end -->"


def update_docs(path: str | Path, result: dict[str, Any]) -> None:
    """Replace the text between :data:`DOCS_START` and :data:`DOCS_END` of the page ``path`` with the kept
    map's tables; a page without the markers is refused and left as it was."""
    fill_section(path, DOCS_START, DOCS_END, f"\n{markdown_tables(result)}\n")
