"""The few-label answer judged on the answer benchmark's kept embeddings: the posterior that starts from
the benchmark's prior (``analyses/accuracy_posterior.py``) against the estimate that starts from nothing
(``analyses/probes.few_label_estimates``), leave one corpus out.

For each classification corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior is
learned from the *other* corpora: the label-free rule chosen on them (among the geometric scores the
answer stage has) and its record by rank. Then seeded draws of random texts are labelled with the
corpus's own labels in batches of 16, and after each batch both estimates name a model; each pick is
judged by the oracle (5-fold logistic regression on all texts).

Prints, per k: mean points lost and share within 2 points (both estimates, and the label-free pick at
k = 0), how often the named model changes between consecutive batches, the calibration of the stated
chance of being within 2 points, how many draws are settled and how many of those are within 2 points,
and how often "n more labels would settle it" came true. ``--json`` writes every figure.

    .venv/bin/python bench/few_label_prior.py --root .cache/answer-benchmark --draws 20
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flare_core.analyses import accuracy_posterior as ap  # noqa: E402
from flare_core.analyses.accuracy_posterior import estimate_frame, forecast, prior_by_rank  # noqa: E402
from flare_core.analyses.label_free_rules import choose_rule, ranked_by  # noqa: E402
from flare_core.analyses.probes import curve_scores, few_label_estimates, probe_scores  # noqa: E402
from flare_core.benchmark.answer_stage import (  # noqa: E402
    chance_level,
    judged_record,
    oracle_series,
    record_table,
)
from flare_core.benchmark.embedding_store import load_kept  # noqa: E402

KS = (16, 32, 48, 64, 80, 96, 112, 128)
TOLERANCE = 2.0
SURE = 0.9
GEOMETRIC_RULES = ("dim", "effective_rank", "uniformity")


def cases_of(records: dict[str, dict]) -> list[dict]:
    return [
        {"case": name, "table": record_table(r), "oracle": oracle_series(r), "models": r["candidates"]}
        for name, r in records.items()
    ]


def lost(oracle: pd.Series, pick: str, models: list[str]) -> float:
    return float(100.0 * (oracle.loc[models].max() - oracle.loc[pick]))


#: The estimates judged: (name, prior: "benchmark" or "flat", paired errors). "from nothing" is the
#: estimate before the posterior (``probes.few_label_estimates`` without a prior).
VARIANTS = {
    # name: (prior, per-text scores, error structure, inflation of the labels' error, carry-forward points)
    "posterior": ("benchmark", "curve", "pooled", 1.1, 0.0),
    "posterior, error as before": ("benchmark", "curve", "pooled", 2.0, 4.0),
    "posterior, sample covariance": ("benchmark", "curve", "sample", 1.1, 0.0),
    "posterior, plain probe": ("benchmark", "plain", "pooled", 1.5, 0.0),
    "flat prior": ("flat", "curve", "pooled", 1.1, 0.0),
}
#: The variant the product ships (its constants are accuracy_posterior's).
SHIPPED = "posterior"


def _frame(prior, correct, chance, seed, variant):
    _, _, structure, inflation, carry = variant
    kept = ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS
    ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS = structure, inflation, carry
    try:
        return estimate_frame(prior, correct, tolerance_points=TOLERANCE, chance_level=chance, seed=seed)
    finally:
        ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS = kept


def judge_corpus(root: str, name: str, records: dict[str, dict], draws: int, seed: int) -> list[dict]:
    record = records[name]
    cases = cases_of({n: r for n, r in records.items() if n != name})
    rule = choose_rule(cases, GEOMETRIC_RULES)
    candidates = record["candidates"]
    ranked = ranked_by(record_table(record).loc[candidates], rule)
    priors = {"benchmark": prior_by_rank(cases, rule, ranked).reordered(candidates),
              "flat": ap.AccuracyPrior.flat(candidates)}  # fmt: skip
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    oracle = oracle_series(record)
    chance = chance_level(record)
    rows = [{"corpus": name, "draw": -1, "k": 0, "method": "label-free", "pick": ranked[0],
             "lost": lost(oracle, ranked[0], candidates), "rule": rule}]  # fmt: skip
    for draw in range(draws):
        order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
        for k in KS:
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2:
                continue
            correct, _ = curve_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)
            plain, _ = probe_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)
            old = few_label_estimates(xs, picked, labels[picked].tolist(), seed=draw)
            pick = str(old["model"].iloc[0])
            rows.append({"corpus": name, "draw": draw, "k": k, "method": "from nothing", "pick": pick,
                         "lost": lost(oracle, pick, candidates), "rule": rule})  # fmt: skip
            for method, variant in VARIANTS.items():
                which = variant[0]
                frame = _frame(
                    priors[which], correct if variant[1] == "curve" else plain, chance, draw, variant
                )
                pick = str(frame["model"].iloc[0])
                row = {"corpus": name, "draw": draw, "k": k, "method": method, "pick": pick,
                       "lost": lost(oracle, pick, candidates), "rule": rule,
                       "p_within": float(frame["p_within"].iloc[0])}  # fmt: skip
                row["settled"] = bool(row["p_within"] >= SURE)
                row["stated"] = [[float(p), lost(oracle, str(m), candidates)]
                                 for m, p in zip(frame["model"], frame["p_within"], strict=True)]  # fmt: skip
                if method == SHIPPED and not row["settled"] and k in (16, 32, 64):
                    row["more"] = forecast(priors[which], correct, tolerance_points=TOLERANCE, sure=SURE,
                                           step=16, most=256, seed=draw)  # fmt: skip
                    row["more_came_true"] = _came_true(row["more"], order, k, labels, xs, priors[which],
                                                       chance, draw)  # fmt: skip
                rows.append(row)
    return rows


def _came_true(more, order, k, labels, xs, prior, chance, draw) -> bool | None:
    if more is None or k + more > labels.shape[0]:
        return None
    picked = order[: k + more]
    _, codes = np.unique(labels[picked], return_inverse=True)
    correct, _ = curve_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)
    frame = estimate_frame(prior, correct, tolerance_points=TOLERANCE, chance_level=chance, seed=draw)
    return bool(frame["p_within"].iloc[0] >= SURE)


def summary(rows: pd.DataFrame) -> dict:
    out: dict = {}
    zero = rows[rows["k"] == 0]
    out["label_free"] = {
        "mean_lost": float(zero["lost"].mean()),
        "within": float((zero["lost"] <= TOLERANCE).mean()),
    }
    out["by_k"] = [
        {"method": method, "k": int(k), "mean_lost": float(g["lost"].mean()),
         "within": float((g["lost"] <= TOLERANCE).mean()), "draws": len(g)}
        for (method, k), g in rows[rows["k"] > 0].groupby(["method", "k"])
    ]  # fmt: skip
    out["stability"] = {}
    for method, group in rows[rows["k"] >= 32].groupby("method"):
        changes = (
            group.sort_values("k")
            .groupby(["corpus", "draw"])["pick"]
            .apply(lambda s: (s.to_numpy()[1:] != s.to_numpy()[:-1]).mean() if len(s) > 1 else np.nan)
        )
        out["stability"][method] = float(changes.mean())
    out["calibration"], out["settled"] = {}, {}
    for method, post in rows[(rows["k"] > 0) & rows["stated"].notna()].groupby("method"):
        pairs = [(p, lo <= TOLERANCE + 1e-9, c) for c, st in zip(post["corpus"], post["stated"], strict=True)
                 for p, lo in st]  # fmt: skip
        frame = pd.DataFrame(pairs, columns=["stated", "observed", "corpus"])
        frame["bin"] = pd.cut(frame["stated"], [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], include_lowest=True).astype(
            str
        )
        out["calibration"][method] = {
            "overall": _ece(frame), "per_corpus": {c: _ece(g) for c, g in frame.groupby("corpus")},
            "reliability": frame.groupby("bin").agg(stated=("stated", "mean"), observed=("observed", "mean"),
                                                    count=("stated", "size")).reset_index().to_dict(orient="records"),
        }  # fmt: skip
        settled = post[post["settled"].astype(bool)]
        out["settled"][method] = {
            "share_at_64": float(post[post["k"] == 64]["settled"].mean()),
            "share_at_128": float(post[post["k"] == 128]["settled"].mean()),
            "within_when_settled": float((settled["lost"] <= TOLERANCE).mean()) if len(settled) else None,
            "n_settled": len(settled),
        }
    post = rows[rows["method"] == "posterior"]
    told = post.dropna(subset=["more_came_true"]) if "more_came_true" in post else post.iloc[0:0]
    out["forecast"] = {"told": len(told), "came_true": float(told["more_came_true"].mean()) if len(told) else None,
                       "never": int(post["more"].isna().sum() - post["settled"].sum()) if "more" in post else 0}  # fmt: skip
    return out


def _ece(frame: pd.DataFrame) -> float:
    table = frame.groupby("bin").agg(
        stated=("stated", "mean"), observed=("observed", "mean"), n=("stated", "size")
    )
    return float((table["n"] * (table["stated"] - table["observed"]).abs()).sum() / table["n"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpora", default="", help="comma-separated; default every kept classification corpus"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = Path(args.root)
    names = [n for n in args.corpora.split(",") if n] or sorted(
        p.name for p in root.iterdir() if (p / "corpus.json").is_file()
        and json.loads((p / "corpus.json").read_text())["oracle"] == "classification"
    )  # fmt: skip
    start = time.perf_counter()
    records = {n: judged_record(root, n, seed=args.seed) for n in names}
    print(f"judged {len(records)} corpora in {time.perf_counter() - start:.0f} s", flush=True)
    rows = []
    for name in names:
        t = time.perf_counter()
        rows += judge_corpus(str(root), name, records, args.draws, args.seed)
        print(f"{name}: {time.perf_counter() - t:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    result = summary(frame)
    per_corpus = (
        frame[frame["k"] > 0].groupby(["corpus", "method"])["lost"].mean().unstack().round(2)
        .join(frame[frame["k"] == 0].set_index("corpus")[["lost", "rule"]].rename(columns={"lost": "label_free"}))
    )  # fmt: skip
    by_k = pd.DataFrame(result["by_k"]).pivot(index="k", columns="method", values="mean_lost").round(2)
    within = pd.DataFrame(result["by_k"]).pivot(index="k", columns="method", values="within").round(2)
    print(f"mean points lost by k (label-free pick: {result['label_free']['mean_lost']:.2f})")
    print(by_k.to_string())
    print(f"share within {TOLERANCE:g} points by k (label-free: {result['label_free']['within']:.2f})")
    print(within.to_string())
    for key in ("stability", "settled", "forecast"):
        print(key, json.dumps(result[key], default=float))
    print("calibration", {m: round(c["overall"], 3) for m, c in result["calibration"].items()})
    print(per_corpus.to_string())
    if args.json:
        args.json.write_text(json.dumps({"summary": result, "per_corpus": per_corpus.reset_index().to_dict(
            orient="records")}, indent=1, default=float))  # fmt: skip


if __name__ == "__main__":
    main()
