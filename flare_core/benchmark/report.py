"""The validity benchmark in words and tables: the Markdown the docs' benchmark page (``docs/benchmark.md``)
shows between its markers, and the Validation page's table (from a ``benchmark.json`` of
:mod:`flare_core.benchmark.suite`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from flare_core.answer.label_free import USE_WORDS
from flare_core.benchmark.pools import pool_size_lines
from flare_core.benchmark.suite import TABLE_SCORES, agreement_row, finite_mean, score_summary, spearman_of
from flare_core.choosing.validity import regret_points
from flare_core.store import atomic

DOCS_PAGE = Path("docs") / "benchmark.md"  # where the tables are shown, from the repository's root
DOCS_START = "<!-- benchmark:start -->"
DOCS_END = "<!-- benchmark:end -->"


def docs_markers(section: str | None = None) -> tuple[str, str]:
    """The markers around a benchmark's tables in a docs page: the shipped benchmark's (``section`` None)
    or those of another named benchmark, ``<!-- benchmark-<section>:start -->`` … ``:end -->``."""
    if section is None:
        return DOCS_START, DOCS_END
    if not section.replace("-", "").isalnum():
        raise ValueError(f"a docs section name is letters, digits and hyphens: {section!r}")
    return f"<!-- benchmark-{section}:start -->", f"<!-- benchmark-{section}:end -->"


def results_frame(result: dict[str, Any]) -> pd.DataFrame:
    """One row per corpus, in words: corpus, texts, best model by the labels, the verdict, trust, points
    lost by its leader, and the Spearman correlation of the flow ranking with the labels."""
    rows = [
        {
            "corpus": r["corpus"],
            "task": r["task"],
            "texts": r["n_texts"],
            "best model by the labels": r["best"],
            "verdict": r["verdict"]["recommended"] or "no recommendation",
            "leading model": r["verdict"]["leading"],
            "trust": r["verdict"]["trust"],
            "points lost by the leader": r["regret"]["leading"],
            "ranking vs labels (ρ)": spearman_of(r, "flow"),
        }
        for r in result["corpora"]
    ]
    return pd.DataFrame(rows)


def _fmt(value: float | None, spec: str = "{:.2f}") -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and not math.isfinite(value))
        else spec.format(value)
    )


def _with_interval(row: dict[str, Any] | None) -> str:
    """``0.79 [0.14, 1.00]``: a Spearman correlation and its bootstrap interval."""
    if row is None:
        return "–"
    return f"{_fmt(row['spearman'])} [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"


def markdown_table(result: dict[str, Any]) -> str:
    """The benchmark as Markdown: one row per corpus (the label-free choice judged leave one corpus out, the
    label-free ranking's leader, each ρ with its bootstrap interval), the means, the kNN, V-measure and
    pool-size tables, every score and variant averaged over the corpora (:func:`score_summary`), then the
    answer's tables (:func:`answer_lines`)."""
    head = (
        "| corpus | texts | best model (oracle) | without labels: pick (rule) | points lost | ranking's "
        "leader | points lost | trust (ranking) | "
        + " | ".join(f"ρ {s} [interval]" for s in TABLE_SCORES)
        + " |"
    )
    lines = [head, "|" + "---|" * (8 + len(TABLE_SCORES))]
    summary = result["summary"]
    choices = _label_free_rows(summary)
    lost = []
    for r in result["corpora"]:
        choice = choices.get(r["corpus"], {})
        lost.append(choice.get("lost"))
        pick = f"{choice['pick']} ({choice['rule']})" if choice.get("pick") else "–"
        lines.append(
            f"| {r['corpus']} | {r['n_texts']} | {r['best']} | {pick} | "
            f"{_fmt(choice.get('lost'), '{:.1f}')} | {r['verdict']['leading']} | "
            f"{_fmt(r['regret']['leading'], '{:.1f}')} | {r['verdict']['trust']} | "
            + " | ".join(_with_interval(agreement_row(r, s)) for s in TABLE_SCORES)
            + " |"
        )
    lines.append(
        f"| **mean** | | | | {_fmt(finite_mean(lost), '{:.1f}')} | | "
        f"{_fmt(summary['mean_regret_leading'], '{:.1f}')} | | "
        + " | ".join(_fmt(summary["mean_spearman"][s]) for s in TABLE_SCORES)
        + " |"
    )
    lines += retrieval_lines(result) + _knn_lines(result) + vmeasure_lines(result) + pool_size_lines(result)
    scores = score_summary(result["corpora"])
    if not scores.empty:
        lines += [
            "",
            "| score | mean ρ | lowest ρ | mean τ | points lost by its top model (mean) | top model is the "
            "best on |",
            "|---|---|---|---|---|---|",
        ]
        n = len(result["corpora"])
        for row in scores.to_dict(orient="records"):
            lines.append(
                f"| {row['score']} | {_fmt(row['mean_spearman'])} | {_fmt(row['lowest_spearman'])} | "
                f"{_fmt(row['mean_kendall'])} | {_fmt(row['mean_points_lost_by_top'], '{:.1f}')} | "
                f"{row['top_is_best_on']} of {n} |"
            )
    return "\n".join(lines + answer_lines(result))


def _label_free_rows(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Corpus → its leave-one-corpus-out label-free choice for the use its oracle judges (classification
    corpora: a classifier; similarity: search)."""
    out: dict[str, dict[str, Any]] = {}
    for use in ("classifier", "search"):
        for row in (summary.get("label_free") or {}).get(use, {}).get("rows", []):
            out.setdefault(row["case"].rsplit(" (", 1)[0], row)
    return out


#: The FLARE paper's Spearman correlation of its information-sufficiency score with retrieval performance.
PAPER_RETRIEVAL_RHO = 0.72


def retrieval_lines(result: dict[str, Any]) -> list[str]:
    """The retrieval corpora judged by nDCG@10 over their queries: per corpus, the best candidate and its
    nDCG@10, each label-free score's ρ with the candidates' nDCG@10 and the nDCG points lost by following
    its top candidate; their means; FLARE's published ρ for retrieval beside them. Empty without one."""
    judged = [r for r in result["corpora"] if r.get("oracle") == "ndcg_at_10"]
    if not judged:
        return []
    lines = [
        "",
        "| retrieval corpus | documents | queries | best model (nDCG@10) | "
        + " | ".join(f"ρ {s} (points lost by its top model)" for s in TABLE_SCORES)
        + " |",
        "|" + "---|" * (4 + len(TABLE_SCORES)),
    ]
    for r in judged:
        table = {row["model"]: row for row in r["table"]}
        best = f"{r['best']} ({_fmt(table.get(r['best'], {}).get('oracle'))})"
        lines.append(
            f"| {r['corpus']} | {r['n_texts']} | {r.get('n_queries', '–')} | {best} | "
            + " | ".join(
                f"{_fmt(spearman_of(r, s))} ({_fmt(r['regret'].get(f'top_{s}'), '{:.1f}')})"
                for s in TABLE_SCORES
            )
            + " |"
        )
    lines.append(
        "| **mean** | | | | "
        + " | ".join(
            f"{_fmt(finite_mean([spearman_of(r, s) for r in judged]))} "
            f"({_fmt(finite_mean([r['regret'].get(f'top_{s}') for r in judged]), '{:.1f}')})"
            for s in TABLE_SCORES
        )
        + " |"
    )
    paper = [f"{PAPER_RETRIEVAL_RHO:.2f} (its IS score)"] + [""] * (len(TABLE_SCORES) - 1)
    lines.append("| FLARE paper (retrieval) | | | | " + " | ".join(paper) + " |")
    return lines


def _knn_lines(result: dict[str, Any]) -> list[str]:
    """The per-corpus table judged by kNN accuracy instead (classification corpora), with its means."""
    judged = [r for r in result["corpora"] if r.get("knn")]
    if not judged:
        return []
    lines = [
        "",
        "| corpus (kNN oracle) | best model (kNN) | points lost | "
        + " | ".join(f"ρ {s}" for s in TABLE_SCORES)
        + " |",
        "|" + "---|" * (3 + len(TABLE_SCORES)),
    ]
    for r in judged:
        knn = r["knn"]
        lines.append(
            f"| {r['corpus']} | {knn['best']} | {_fmt(knn['leading'], '{:.1f}')} | "
            + " | ".join(_fmt(spearman_of(knn, s)) for s in TABLE_SCORES)
            + " |"
        )
    means = result["summary"].get("mean_spearman_knn", {})
    lines.append(
        f"| **mean** | | {_fmt(finite_mean([r['knn']['leading'] for r in judged]), '{:.1f}')} | "
        + " | ".join(_fmt(means.get(s)) for s in TABLE_SCORES)
        + " |"
    )
    return lines


#: The FLARE paper's Spearman correlation of its information-sufficiency score with clustering performance.
PAPER_CLUSTERING_RHO = 0.83


def vmeasure_lines(result: dict[str, Any]) -> list[str]:
    """The corpora with classes judged by how well k-means groups each candidate's embeddings (V-measure
    against the classes, ``oracle_vmeasure`` of the records' tables): per corpus, the best candidate by
    V-measure, the V-measure points (× 100) lost by the ranking's leader and each label-free score's
    Spearman ρ with V-measure over the trained candidates; their means; FLARE's published ρ for
    clustering beside them. Empty without such a corpus."""
    from flare_core.analyses.correlate import correlation_table

    judged = []
    for r in result["corpora"]:
        table = pd.DataFrame(r["table"]).set_index("model")
        if "oracle_vmeasure" not in table or table.loc[r["candidates"], "oracle_vmeasure"].isna().all():
            continue
        oracle = table["oracle_vmeasure"].astype(float)
        candidates = list(r["candidates"])
        scores = [s for s in TABLE_SCORES if s in table]
        agree = correlation_table(
            table.loc[candidates, scores].astype(float), oracle.loc[candidates].to_frame("oracle"), n_boot=0
        ).set_index("label_free")["spearman_rho"]
        judged.append(
            {
                "corpus": r["corpus"],
                "best": str(oracle.loc[candidates].idxmax()),
                "lost": regret_points(oracle, r["verdict"]["leading"], candidates),
                "rho": {s: float(agree[s]) if s in agree.index else None for s in TABLE_SCORES},
            }
        )
    if not judged:
        return []
    lines = [
        "",
        "| corpus (V-measure oracle) | best model (V-measure) | points lost | "
        + " | ".join(f"ρ {s}" for s in TABLE_SCORES)
        + " |",
        "|" + "---|" * (3 + len(TABLE_SCORES)),
    ]
    for row in judged:
        lines.append(
            f"| {row['corpus']} | {row['best']} | {_fmt(row['lost'], '{:.1f}')} | "
            + " | ".join(_fmt(row["rho"][s]) for s in TABLE_SCORES)
            + " |"
        )
    lines.append(
        f"| **mean** | | {_fmt(finite_mean([row['lost'] for row in judged]), '{:.1f}')} | "
        + " | ".join(_fmt(finite_mean([row["rho"][s] for row in judged])) for s in TABLE_SCORES)
        + " |"
    )
    paper = [f"{PAPER_CLUSTERING_RHO:.2f} (its IS score)"] + [""] * (len(TABLE_SCORES) - 1)
    lines.append("| FLARE paper (clustering) | | | " + " | ".join(paper) + " |")
    return lines


def update_docs(path: str | Path, result: dict[str, Any], section: str | None = None) -> None:
    """Replace the text between the benchmark markers of the page ``path`` (:func:`docs_markers` of
    ``section``) with the tables of ``result``."""
    start, end = docs_markers(section)
    body = (
        f"\n{markdown_table(result)}\n\n"
        f"_{len(result['corpora'])} corpora, {len(result['models'])} ranked models, made "
        f"{result['created'][:10]} by `flare benchmark`._\n"
    )
    fill_section(path, start, end, body)


def fill_section(path: str | Path, start: str, end: str, body: str) -> None:
    """Replace the text between the markers ``start`` and ``end`` of the page ``path`` with ``body``; a
    page without both markers is refused and left as it was."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise ValueError(f"{path} has no {start} … {end} section to fill")
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    atomic.write_text(path, before + start + body + end + after)


# -- the answer's tables ---------------------------------------------------------------------------------

_METHOD_WORDS = {
    ("random", "product"): "the product's estimate, random texts",
    ("chosen", "product"): "the product's estimate, texts the product chose",
    ("random", "cv-lr"): "cross-validated logistic regression, random texts",
    ("random", "logme"): "LogME, random texts",
    ("random", "knn-loo"): "kNN leave-one-out, random texts",
}


def answer_lines(result: dict[str, Any]) -> list[str]:
    """The answer's tables: full labels, few labels (averaged, then the product's per corpus), the
    stopping advice, the label-free choice per use, and what each ground of the answer lost."""
    return [
        *_full_lines(result),
        *_few_lines(result),
        *_stopping_lines(result),
        *_label_free_lines(result),
        *_level_lines(result),
    ]


def _labelled(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result["corpora"] if r.get("labels")]


def _full_lines(result: dict[str, Any]) -> list[str]:
    judged = _labelled(result)
    if not judged:
        return []
    lines = [
        "",
        "| full labels: corpus | splits | points lost (mean) | worst | the pick or its named tie holds the "
        "best |",
        "|---|---|---|---|---|",
    ]
    for r in judged:
        full = pd.DataFrame(r["labels"]["full"])
        held = int((full["best_tied_lost"] <= 1e-9).sum())
        lines.append(
            f"| {r['corpus']} | {len(full)} | {_fmt(full['points_lost'].mean(), '{:.2f}')} | "
            f"{_fmt(full['points_lost'].max(), '{:.2f}')} | {held} of {len(full)} |"
        )
    return lines


def _few_lines(result: dict[str, Any]) -> list[str]:
    judged = _labelled(result)
    if not judged:
        return []
    frame = pd.concat([pd.DataFrame(r["labels"]["few"]).assign(corpus=r["corpus"]) for r in judged])
    ks = sorted(frame["k"].unique())
    head = "| few labels, mean over corpora: method | " + " | ".join(f"k = {k}" for k in ks) + " |"
    lines = ["", head, "|" + "---|" * (1 + len(ks))]
    means = frame.groupby(["texts", "estimator", "k"], sort=False)[
        ["share_within", "mean_points_lost"]
    ].mean()
    for texts, estimator in _METHOD_WORDS:
        if (texts, estimator, ks[0]) not in means.index:
            continue
        cells = [
            f"{100 * means.loc[(texts, estimator, k), 'share_within']:.0f}% / "
            f"{means.loc[(texts, estimator, k), 'mean_points_lost']:.1f}"
            for k in ks
        ]
        lines.append(f"| {_METHOD_WORDS[(texts, estimator)]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| product's estimate, random texts: corpus | " + " | ".join(f"k = {k}" for k in ks) + " |",
        "|" + "---|" * (1 + len(ks)),
    ]
    product = frame[(frame["texts"] == "random") & (frame["estimator"] == "product")]
    for corpus, group in product.groupby("corpus", sort=False):
        by_k = group.set_index("k")
        lines.append(
            f"| {corpus} | "
            + " | ".join(
                f"{100 * by_k.loc[k, 'share_within']:.0f}% / {by_k.loc[k, 'mean_points_lost']:.1f}"
                for k in ks
            )
            + " |"
        )
    return lines


def _stopping_lines(result: dict[str, Any]) -> list[str]:
    judged = _labelled(result)
    if not judged:
        return []
    lines = [
        "",
        "| stopping advice: corpus | draws called settled | of them within 2 points |",
        "|---|---|---|",
    ]
    for r in judged:
        frame = pd.DataFrame(r["labels"]["stopping"])
        frame = frame[frame["texts"] == "random"]
        settled = int(frame["n_settled"].sum())
        within = (frame["settled_within"].fillna(0) * frame["n_settled"]).sum() / settled if settled else None
        lines.append(
            f"| {r['corpus']} | {settled} | {_fmt(None if within is None else 100 * within, '{:.0f}%')} |"
        )
    return lines


def _label_free_lines(result: dict[str, Any]) -> list[str]:
    summary = result["summary"].get("label_free") or {}
    if not summary:
        return []
    lines = [
        "",
        "| without labels: use | rule chosen on all corpora | points lost, each corpus by a rule chosen "
        "on the others (mean / worst) | short list holds a model within 1 point | best single rule "
        "(mean / worst) |",
        "|---|---|---|---|---|",
    ]
    for use in [u for u in USE_WORDS if u in summary]:  # a fixed order (benchmark.json sorts its keys)
        block = summary[use]
        best = min(block["rules"], key=lambda row: row["mean_lost"]) if block["rules"] else None
        single = (
            f"{best['rule']} ({_fmt(best['mean_lost'], '{:.1f}')} / {_fmt(best['worst_lost'], '{:.1f}')})"
            if best
            else "–"
        )
        lines.append(
            f"| {use} | {block['final']} | {_fmt(block['mean_lost'], '{:.1f}')} / "
            f"{_fmt(block['worst_lost'], '{:.1f}')} | {block['short_list_within_1']} of {block['cases']} | "
            f"{single} |"
        )
    return lines


def _level_lines(result: dict[str, Any]) -> list[str]:
    levels = result["summary"].get("trust_levels") or []
    if not levels:
        return []
    lines = [
        "",
        "| the answer's ground | judged on | points lost (mean) | worst | within 2 points |",
        "|---|---|---|---|---|",
    ]
    for row in levels:
        within = None if row["within_2"] is None else 100 * row["within_2"]
        lines.append(
            f"| {row['level']} | {row['judged']} ({row['count']}) | {_fmt(row['mean_lost'], '{:.1f}')} | "
            f"{_fmt(row['worst_lost'], '{:.1f}')} | {_fmt(within, '{:.0f}%')} |"
        )
    return lines
