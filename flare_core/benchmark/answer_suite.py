"""The answer benchmark over every benchmark corpus: embed (or read the kept vectors), judge, and sum up
what the answer's rules are chosen by.

:func:`run_answer_benchmark` embeds each corpus with the whole pool (:mod:`embedding_store`), judges it
(:mod:`answer_stage`) and returns the benchmark: its records and :func:`answer_summary`:

- ``scores``: per use and label-free score, the mean Spearman correlation with the use's oracle over the
  corpora, with a 95% interval from resampling the corpora;
- ``rules``: per use, the label-free rule chosen leave one corpus out (each corpus judged by the rule
  chosen on the others), its mean and worst points lost, what each corpus lost, and the rule chosen on
  every corpus (what the product would ship);
- ``control_recommended``: how many cases any rule's pick was a control (never, for a sound rule).

Only the geometric scores are here (the width, effective rank, uniformity, IsoScore): information
sufficiency needs the flows and mixtures of the benchmark's second stage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.analyses.correlate import ranking_correlation
from flare_core.answer.label_free import USE_WORDS, benchmark_cases
from flare_core.benchmark.answer_stage import judged_record
from flare_core.benchmark.embedding_store import embed_corpus
from flare_core.benchmark.posterior_draws import BEFORE, PRODUCT, judge_all, per_corpus
from flare_core.benchmark.posterior_draws import summary as posterior_summary
from flare_core.benchmark.reading_draws import all_rows
from flare_core.choosing.label_free_rules import leave_one_corpus_out, rule_table, top_models
from flare_core.choosing.probe_reading import fit
from flare_core.data.benchmark_corpora import GROUPED_BY_CLASS, load_benchmark_corpus

ANSWER_BENCHMARK_VERSION = 1
#: The label-free rules the answer stage can judge (no information sufficiency without the IS stage).
GEOMETRIC_RULES = ("dim", "effective_rank", "uniformity")
#: The scores whose agreement with the oracle is summed up.
SCORES = ("dim", "effective_rank", "uniformity", "isoscore", "silhouette")
#: Draws of random labelled texts per classification corpus behind the few-label answer's record.
FEW_LABEL_DRAWS = 10
#: Resamples of the corpora behind each mean correlation's interval.
RESAMPLES = 2000


def run_answer_benchmark(
    root: str | Path,
    corpora: Sequence[str],
    models: Sequence[str],
    *,
    seed: int = 0,
    rejudge: bool = False,
    draws: int = FEW_LABEL_DRAWS,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Embed every corpus of ``corpora`` with ``models`` (the vectors kept under ``root``; those kept
    before are read, not embedded again), judge it, and return the answer benchmark: ``version``,
    ``models``, ``corpora`` (one record each, with the ``seconds`` its stage took), ``summary``.
    ``rejudge``: judge every kept corpus again (nothing is embedded that is kept). ``draws``: seeded draws
    of random labelled texts per classification corpus behind ``few_labels``, the few-label answer's record
    (:mod:`flare_core.benchmark.posterior_draws`; 0: none)."""
    records = []
    for name in corpora:
        start = time.perf_counter()
        bench = load_benchmark_corpus(name, seed=seed)
        embed_corpus(bench, models, root, seed=seed, log=log)
        record = judged_record(root, name, seed=seed, again=rejudge)
        record["cleaning"] = bench.cleaning
        if record["oracle"] == "accuracy":
            record["groups_by_class"] = name in GROUPED_BY_CLASS
        record["seconds"] = round(time.perf_counter() - start, 1)
        records.append(record)
        if log is not None:
            log(f"{name}: judged, {record['seconds']:.0f} s")
    result = {
        "version": ANSWER_BENCHMARK_VERSION,
        "models": list(models),
        "seed": seed,
        "corpora": records,
        "summary": answer_summary(records, seed=seed),
    }
    if draws:
        block = few_label_block(str(root), {r["corpus"]: r for r in records}, draws, seed)
        if block:
            result["few_labels"] = block
    return result


def few_label_block(root: str, records: dict[str, dict], draws: int, seed: int = 0) -> dict[str, Any] | None:
    """The few-label answer's record on the kept classification corpora of ``records``
    (:mod:`~flare_core.benchmark.posterior_draws`: the product's posterior beside the one before the
    learned reading, each corpus judged with what was learned on the others) and the reading of the labels
    the product ships, learned on them all; None with fewer than three classification corpora (each is
    judged with a reading learned on the others, and a reading needs two)."""
    learned = all_rows(root, records, seed=seed)
    if len({row.corpus for row in learned}) < 3:
        return None
    rows = judge_all(root, records, draws, seed, variants={**PRODUCT, **BEFORE}, learned=learned)
    if not len(rows):
        return None
    return {
        "draws": draws,
        "reading": fit(learned).to_json(),
        **posterior_summary(rows),
        "per_corpus": json.loads(per_corpus(rows).reset_index().to_json(orient="records")),
    }


def answer_summary(records: Sequence[dict[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """The tables of the answer benchmark (see the module docstring)."""
    out: dict[str, Any] = {"scores": [], "rules": {}, "control_recommended": 0}
    for use in USE_WORDS:
        cases = benchmark_cases(list(records), use)
        if not cases:
            continue
        out["scores"] += score_rows(cases, use, seed)
        loco = leave_one_corpus_out(cases, GEOMETRIC_RULES)
        # the same procedure on the same corpora with no record of which models read which texts
        unguarded = leave_one_corpus_out(
            [
                {**case, "table": case["table"].drop(columns="reads_corpus", errors="ignore")}
                for case in cases
            ],
            GEOMETRIC_RULES,
        )
        out["rules"][use] = {
            "chosen_on_all": loco["final"],
            "mean_lost": loco["mean_lost"],
            "worst_lost": loco["worst_lost"],
            "cases": loco["cases"],
            "per_case": loco["rows"],
            "single_rules": rule_table(cases, GEOMETRIC_RULES).to_dict(orient="records"),
            "without_language_guard": {key: unguarded[key] for key in ("final", "mean_lost", "worst_lost")},
        }
        out["control_recommended"] += _controls_picked(cases, records)
    return out


def score_rows(
    cases: list[dict[str, Any]], use: str, seed: int, scores: Sequence[str] = SCORES
) -> list[dict[str, Any]]:
    """Per label-free score of ``scores``: its mean Spearman correlation with ``use``'s oracle over
    ``cases`` (``mean_rho``), with a 95% interval from resampling the corpora (``ci_low``, ``ci_high``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for score in scores:
        rhos = []
        for case in cases:
            models = list(case["models"])
            if score in case["table"]:
                values = case["table"].loc[models, score].astype(float)
                sign = -1.0 if score == "uniformity" and values.max() <= 0 else 1.0
                rhos.append(ranking_correlation(sign * values, case["oracle"].loc[models]))
        rhos_arr = np.asarray([r for r in rhos if np.isfinite(r)])
        if rhos_arr.size == 0:
            continue
        boot = rng.choice(rhos_arr, size=(RESAMPLES, rhos_arr.size)).mean(axis=1)
        rows.append(
            {
                "use": use,
                "score": score,
                "mean_rho": float(rhos_arr.mean()),
                "ci_low": float(np.quantile(boot, 0.025)),
                "ci_high": float(np.quantile(boot, 0.975)),
                "corpora": int(rhos_arr.size),
            }
        )
    return rows


def _controls_picked(cases: list[dict[str, Any]], records: Sequence[dict[str, Any]]) -> int:
    """Cases where a rule, scoring the candidates and the controls together, would pick a control."""
    controls = {m for record in records for m in record.get("controls", [])}
    count = 0
    for case in cases:
        table = case["table"]
        pool = [m for m in table.index if m in set(case["models"]) | controls]
        for rule in GEOMETRIC_RULES:
            if set(top_models(table.loc[pool], rule)) & controls:
                count += 1
    return count


def per_corpus_table(benchmark: dict[str, Any]) -> pd.DataFrame:
    """One row per corpus: ``corpus``, ``task``, ``oracle``, ``n_texts``, ``best``, its oracle value, the
    width rule's pick and its points lost, what reading it dropped (``dropped``, in words), and the
    seconds its models took to embed it (``embed_seconds``, summed) and its judging took
    (``judge_seconds``; NaN when not recorded)."""
    rows = []
    for record in benchmark["corpora"]:
        table = pd.DataFrame(record["table"]).set_index("model")
        oracle = table.loc[record["candidates"], "oracle"].astype(float)
        widest = top_models(table.loc[record["candidates"]], "dim")
        lost = 100.0 * (oracle.max() - oracle.loc[widest].mean()) if widest else float("nan")
        rows.append(
            {
                "corpus": record["corpus"],
                "task": record["task"],
                "oracle": record["oracle"],
                "n_texts": record["n_texts"],
                "best": record["best"],
                "best_value": float(oracle.max()),
                "widest_lost": float(lost),
                "dropped": dropped_words(record.get("cleaning") or {}),
                "embed_seconds": float(table["embed_seconds"].astype(float).sum())
                if "embed_seconds" in table
                else float("nan"),
                "judge_seconds": float(record.get("judge_seconds") or "nan"),
            }
        )
    return pd.DataFrame(rows)


def dropped_words(cleaning: dict[str, int]) -> str:
    """What reading a corpus dropped, in words ("12 repeats, 1 with two labels"); "nothing" when nothing
    was, "–" when it was not recorded."""
    if not cleaning:
        return "–"
    parts = [
        f"{cleaning[key]:,} {words}"
        for key, words in (("empty", "empty"), ("duplicates", "repeats"), ("two_labels", "with two labels"))
        if cleaning.get(key)
    ]
    return ", ".join(parts) or "nothing"


def markdown_tables(benchmark: dict[str, Any]) -> str:
    """The answer benchmark in Markdown: the mean correlation of each score with each use's oracle (with
    its interval), the label-free rule chosen leave one corpus out per use, and one row per corpus."""
    summary = benchmark["summary"]
    lines = [f"Answer benchmark: {len(benchmark['corpora'])} corpora, {len(benchmark['models'])} models.", ""]
    scores = pd.DataFrame(summary["scores"])
    if not scores.empty:
        lines += ["| use | score | mean ρ | 95% interval | corpora |", "| --- | --- | --- | --- | --- |"]
        for row in scores.itertuples(index=False):
            lines.append(
                f"| {row.use} | {row.score} | {row.mean_rho:.2f} | {row.ci_low:.2f} to {row.ci_high:.2f} "
                f"| {row.corpora} |"
            )
        lines.append("")
    lines += [
        "| use | rule chosen on all | mean lost | worst lost | cases | without the language guard: mean | "
        "worst |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for use, rule in summary["rules"].items():
        plain = rule.get("without_language_guard") or {}
        before = (
            f"{plain['mean_lost']:.1f} | {plain['worst_lost']:.1f}"
            if plain.get("mean_lost") is not None
            else "– | –"
        )
        lines.append(
            f"| {use} | {rule['chosen_on_all']} | {rule['mean_lost']:.1f} | {rule['worst_lost']:.1f} | "
            f"{rule['cases']} | {before} |"
        )
    lines += ["", f"A control picked by a rule: {summary['control_recommended']} times.", ""]
    table = per_corpus_table(benchmark)
    lines += [
        "| corpus | task | oracle | texts | dropped | best | its value | widest lost | embed s | judge s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in table.itertuples(index=False):
        embed, judge = ("–" if np.isnan(v) else f"{v:.0f}" for v in (row.embed_seconds, row.judge_seconds))
        lines.append(
            f"| {row.corpus} | {row.task} | {row.oracle} | {row.n_texts:,} | {row.dropped} | {row.best} "
            f"| {row.best_value:.3f} | {row.widest_lost:.1f} | {embed} | {judge} |"
        )
    if benchmark.get("few_labels"):
        lines += ["", *few_label_lines(benchmark["few_labels"])]
    lines += ["", "| corpus | source | licence |", "| --- | --- | --- |"]
    lines += [
        f"| {r['corpus']} | {r.get('source', '')} | {r.get('licence', '')} |" for r in benchmark["corpora"]
    ]
    return "\n".join(lines)


def few_label_lines(record: dict[str, Any]) -> list[str]:
    """The few-label answer's record in Markdown: by k, the points lost and the share within the
    tolerance (the posterior, and the one before the learned reading; the label-free pick at k = 0), then
    how often the named model changed between batches, the settled draws, the forecast, the intervals'
    coverage and the reliability of the stated chance of being within the tolerance."""
    tolerance = record.get("tolerance", 2.0)
    by_k = pd.DataFrame(record["by_k"])
    lost = by_k.pivot(index="k", columns="method", values="mean_lost")
    within = by_k.pivot(index="k", columns="method", values="within")
    methods = [m for m in ("posterior", "before reading") if m in lost]
    free = record["label_free"]
    lines = [
        f"Few labels (random texts, {record.get('draws', '?')} draws per corpus, each corpus judged with a "
        "prior learned from the others):",
        "",
        "| labels | " + " | ".join(f"{m}: points lost | {m}: within {tolerance:g}" for m in methods) + " |",
        "| --- | " + " | ".join("--- | ---" for _ in methods) + " |",
        f"| 0 (label-free) | {free['mean_lost']:.2f} | {free['within']:.0%} |"
        + " |" * (2 * len(methods) - 2),
    ]
    for k in lost.index:
        cells = " | ".join(f"{lost.loc[k, m]:.2f} | {within.loc[k, m]:.0%}" for m in methods)
        lines.append(f"| {k} | {cells} |")
    stable = record.get("stability", {})
    settled = record.get("settled", {}).get("posterior", {})
    forecast = record.get("forecast", {})
    calibration = record.get("calibration", {}).get("posterior", {})
    lines += [
        "",
        "The named model changed between consecutive batches after 32 labels in "
        + ", ".join(f"{v:.0%} ({m})" for m, v in stable.items())
        + " of batch pairs.",
        f"Settled (within {tolerance:g} points with at least 90% chance): "
        f"{settled.get('share_at_64', 0):.0%} of draws at 64 labels, {settled.get('share_at_128', 0):.0%} "
        "at 128; "
        + (
            f"{settled['within_when_settled']:.0%} of the {settled['n_settled']} settled draws were within "
            "it."
            if settled.get("within_when_settled") is not None
            else "none settled."
        ),
        f"Told 'n more labels would settle it': {forecast.get('told', 0)} draws"
        + (
            f" ({forecast['named']:.0%} of the unsettled answers at 16, 32 and 64 labels)"
            if forecast.get("named") is not None
            else ""
        )
        + "; n more settled "
        + (
            f"{forecast['came_true']:.0%} of them."
            if forecast.get("came_true") is not None
            else "none of them."
        ),
    ]
    for method, cover in record.get("coverage", {}).items():
        lines.append(
            f"The stated 95% intervals ({method}) held the accuracy with plenty of labels for "
            f"{cover['measured']:.0%} of the models ({cover['named']:.0%} for the named model)."
        )
    if calibration:
        lines += [
            "",
            f"Reliability of the stated chance of being within {tolerance:g} points (calibration error "
            f"{calibration['overall']:.3f}; worst corpus "
            f"{max(calibration['per_corpus'].values()):.3f}):",
            "",
            "| stated | mean stated | observed | models × draws |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r['bin']} | {r['stated']:.2f} | {r['observed']:.2f} | {r['count']} |"
            for r in calibration["reliability"]
        ]
    return lines


#: The markers around the answer benchmark's tables in a docs page.
DOCS_START, DOCS_END = "<!-- answer-benchmark:start -->", "<!-- answer-benchmark:end -->"


def update_docs(path: str | Path, benchmark: dict[str, Any]) -> None:
    """Replace the text between :data:`DOCS_START` and :data:`DOCS_END` of the page ``path`` with the
    answer benchmark's tables."""
    from flare_core.benchmark.report import fill_section

    fill_section(path, DOCS_START, DOCS_END, f"\n{markdown_tables(benchmark)}\n")
