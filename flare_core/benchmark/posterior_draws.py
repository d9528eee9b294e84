"""The few-label answer judged on the answer benchmark's kept embeddings, leave one corpus out: the
accuracy posterior (:mod:`flare_core.analyses.accuracy_posterior`) that starts from the benchmark's prior,
against the estimate that starts from nothing (:func:`flare_core.analyses.probes.few_label_estimates`
without a prior) and the label-free pick.

For each classification corpus, the prior is learned from the *other* corpora: the label-free rule
chosen on them (among the geometric scores the answer stage has) and its record by rank. Seeded draws of
random texts are labelled with the corpus's own labels in batches of 16; after each batch every estimate
names a model, judged by the oracle (5-fold logistic regression on all texts). :func:`summary` gives, per
k, the mean points lost and the share within :data:`TOLERANCE` points, how often the named model changes
between batches, the calibration of the stated chance of being within the tolerance, how many draws are
settled and how many of those are within it, and how often "n more labels would settle it" came true.

A variant is ``(prior: "benchmark", "flat", "with models" or "benchmark x<f>" (spreads times f), per-text scores: "curve" or "plain", error structure,
inflation, carry-forward points)``; the product's is :data:`PRODUCT`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from flare_core.analyses import accuracy_posterior as ap
from flare_core.analyses.accuracy_posterior import estimate_frame, forecast, prior_by_rank
from flare_core.analyses.label_free_rules import choose_rule, ranked_by
from flare_core.analyses.probes import curve_scores, few_label_estimates, probe_scores
from flare_core.benchmark.answer_stage import chance_level, oracle_series, record_table
from flare_core.benchmark.embedding_store import load_kept

KS = (16, 32, 48, 64, 80, 96, 112, 128)
TOLERANCE = 2.0
SURE = 0.9
GEOMETRIC_RULES = ("dim", "effective_rank", "uniformity")


def cases_of(records: Mapping[str, dict]) -> list[dict[str, Any]]:
    """Answer records as the label-free rules' cases of a classifier."""
    return [
        {"case": name, "table": record_table(r), "oracle": oracle_series(r), "models": r["candidates"]}
        for name, r in records.items()
    ]


def lost(oracle: pd.Series, pick: str, models: Sequence[str]) -> float:
    """Points lost by ``pick`` against the oracle's best of ``models``."""
    return float(100.0 * (oracle.loc[models].max() - oracle.loc[pick]))


#: The product's variant: the benchmark's prior, the learning-curve scores and accuracy_posterior's own
#: error model.
PRODUCT = {
    "posterior": (
        "benchmark", "curve" if ap.EXTRAPOLATED else "plain", ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION,
        ap.CARRY_ERROR_POINTS,
    )
}  # fmt: skip
SHIPPED = "posterior"


@contextlib.contextmanager
def _constants(variant: tuple) -> Iterator[None]:
    """accuracy_posterior's error model set to ``variant``'s for the block."""
    _, _, structure, inflation, carry = variant
    kept = ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS
    ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS = structure, inflation, carry
    try:
        yield
    finally:
        ap.ERROR_STRUCTURE, ap.SPREAD_INFLATION, ap.CARRY_ERROR_POINTS = kept


def _frame(prior, correct, chance, seed, variant, named_before=None):
    with _constants(variant):
        return estimate_frame(prior, correct, tolerance_points=TOLERANCE, chance_level=chance, seed=seed,
                              named_before=named_before)  # fmt: skip


def prior_with_models(
    cases: Sequence[Mapping[str, Any]], base: ap.AccuracyPrior, *, least: int = 3
) -> ap.AccuracyPrior:
    """``base`` (a prior by rank) joined with each candidate's own record on the benchmark ``cases``: a
    candidate judged on at least ``least`` cases stood, on each, some points above the mean of the
    candidates the case shares with ``base``; the mean of those standings (its spread widened as
    :func:`~flare_core.analyses.accuracy_posterior.rank_record`'s, for one more corpus) is a second, independent reading of its standing, and
    the two are weighted by their precisions. A candidate the benchmark never judged keeps ``base``'s. An alternative
    judged beside the product's prior (``bench/studies/few_label_prior.py``), not the product's."""
    models = list(base.models)
    standings: dict[str, list[float]] = {m: [] for m in models}
    for case in cases:
        shared = [m for m in models if m in set(case["models"])]
        oracle = case["oracle"].reindex(shared).astype(float).dropna()
        if len(oracle) < 2:
            continue
        for m, value in (oracle - oracle.mean()).items():
            standings[m].append(float(value))
    mean, sd = base.mean.copy(), base.sd.copy()
    for i, m in enumerate(models):
        seen = np.asarray(standings[m])
        n = seen.size
        if n < max(least, 2):
            continue
        widen = np.sqrt(1.0 + 1.0 / n) * stats.t.ppf(ap.ONE_SD, n - 1) / stats.norm.ppf(ap.ONE_SD)
        own_sd = max(widen * float(seen.std(ddof=1)), ap.MIN_SD_POINTS / 100.0)
        w_base, w_own = base.sd[i] ** -2, own_sd**-2
        mean[i] = (w_base * base.mean[i] + w_own * seen.mean()) / (w_base + w_own)
        sd[i] = (w_base + w_own) ** -0.5
    source = f"{base.source}, joined with each model's own record"
    return ap.AccuracyPrior(tuple(models), mean - mean.mean(), sd, base.level_mean, base.level_sd, source)


def left_out(name: str, records: Mapping[str, dict]) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Corpus ``name`` left out: the other ``records`` as cases, the label-free rule chosen on them, and
    ``name``'s candidates ranked by that rule."""
    cases = cases_of({n: r for n, r in records.items() if n != name})
    rule = choose_rule(cases, GEOMETRIC_RULES)
    candidates = records[name]["candidates"]
    return cases, rule, list(ranked_by(record_table(records[name]).loc[candidates], rule))


def judge_corpus(
    root: str,
    name: str,
    records: Mapping[str, dict],
    draws: int,
    seed: int = 0,
    variants: Mapping[str, tuple] = PRODUCT,
) -> list[dict[str, Any]]:
    """One row per draw, k and estimate (and one for the label-free pick, k = 0) on the kept corpus
    ``name``; the prior learned from the other ``records``."""
    record = records[name]
    cases, rule, ranked = left_out(name, records)
    candidates = record["candidates"]
    by_rank = prior_by_rank(cases, rule, ranked).reordered(candidates)
    priors = {"benchmark": by_rank, "flat": ap.AccuracyPrior.flat(candidates),
              "with models": prior_with_models(cases, by_rank)}  # fmt: skip
    for which in {v[0] for v in variants.values()} - set(priors):  # "<prior> x<f>": its spreads times f
        base, factor = which.rsplit(" x", 1)
        p = priors[base]
        priors[which] = ap.AccuracyPrior(
            p.models, p.mean, float(factor) * p.sd, p.level_mean, p.level_sd, p.source
        )
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    oracle = oracle_series(record)
    chance = chance_level(record)
    rows = [{"corpus": name, "draw": -1, "k": 0, "method": "label-free", "pick": ranked[0],
             "lost": lost(oracle, ranked[0], candidates), "rule": rule}]  # fmt: skip
    provisional = {}
    for method, variant in variants.items():  # each estimate's pick before any label: its prior's
        frame = _frame(priors[variant[0]], None, chance, 0, variant)
        pick = provisional[method] = str(frame["model"].iloc[0])
        rows.append({"corpus": name, "draw": -1, "k": 0, "method": method, "pick": pick,
                     "lost": lost(oracle, pick, candidates), "rule": rule,
                     "p_within": float(frame["p_within"].iloc[0])})  # fmt: skip
    for draw in range(draws):
        order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
        named = dict(provisional)  # each batch keeps the model named before it unless its labels displace it
        for k in KS:
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2:
                continue
            # each kind of per-text scores once, and only those the variants read (the curve costs more)
            scored = {kind: scorer(xs, picked, codes.reshape(-1), "ridge", seed=draw)[0]
                      for kind, scorer in (("curve", curve_scores), ("plain", probe_scores))
                      if any(v[1] == kind for v in variants.values())}  # fmt: skip
            old = few_label_estimates(xs, picked, labels[picked].tolist(), seed=draw)
            pick = str(old["model"].iloc[0])
            rows.append({"corpus": name, "draw": draw, "k": k, "method": "from nothing", "pick": pick,
                         "lost": lost(oracle, pick, candidates), "rule": rule})  # fmt: skip
            for method, variant in variants.items():
                which = variant[0]
                frame = _frame(priors[which], scored[variant[1]], chance, draw, variant, named[method])
                pick = named[method] = str(frame["model"].iloc[0])
                row = {"corpus": name, "draw": draw, "k": k, "method": method, "pick": pick,
                       "lost": lost(oracle, pick, candidates), "rule": rule,
                       "p_within": float(frame["p_within"].iloc[0])}  # fmt: skip
                row["settled"] = bool(row["p_within"] >= SURE)
                row["stated"] = [[float(p), lost(oracle, str(m), candidates)]
                                 for m, p in zip(frame["model"], frame["p_within"], strict=True)]  # fmt: skip
                row["order"] = [str(m) for m in frame["model"]]
                if method == SHIPPED and not row["settled"] and k in (16, 32, 64):
                    with _constants(variant):
                        row["more"] = forecast(priors[which], scored[variant[1]], tolerance_points=TOLERANCE, sure=SURE,
                                               step=16, most=256, seed=draw)  # fmt: skip
                    row["more_came_true"] = _came_true(row["more"], order, k, labels, xs, priors[which],
                                                       chance, draw, variant, pick)  # fmt: skip
                rows.append(row)
    return rows


def _came_true(more, order, k, labels, xs, prior, chance, draw, variant, named) -> bool | None:
    """Whether the draw, ``more`` labels later (the same seeded order), was settled (``named``: the model
    named now, kept unless those labels displace it)."""
    if more is None or k + more > labels.shape[0]:
        return None
    picked = order[: k + more]
    _, codes = np.unique(labels[picked], return_inverse=True)
    scorer = curve_scores if variant[1] == "curve" else probe_scores
    scores, _ = scorer(xs, picked, codes.reshape(-1), "ridge", seed=draw)
    frame = _frame(prior, scores, chance, draw, variant, named)
    return bool(frame["p_within"].iloc[0] >= SURE)


def summary(rows: pd.DataFrame) -> dict[str, Any]:
    """The tables of :func:`judge_corpus`'s rows (see the module docstring)."""
    out: dict = {"tolerance": TOLERANCE}
    zero = rows[(rows["k"] == 0) & (rows["method"] == "label-free")]
    out["before_labels"] = {
        method: {"mean_lost": float(g["lost"].mean()), "within": float((g["lost"] <= TOLERANCE).mean())}
        for method, g in rows[(rows["k"] == 0) & (rows["method"] != "label-free")].groupby("method")
    }
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


def judge_all(
    root: str, records: Mapping[str, dict], draws: int, seed: int = 0, variants: Mapping[str, tuple] = PRODUCT
) -> pd.DataFrame:
    """:func:`judge_corpus` on every classification record, each prior learned from the other
    classification records alone, as the product's prior for a classifier is."""
    own = {n: r for n, r in records.items() if r.get("oracle") == "accuracy"}
    return pd.DataFrame([row for n in own for row in judge_corpus(root, n, own, draws, seed, variants)])


def per_corpus(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean points lost per corpus and estimate, beside the label-free pick's and the rule it followed."""
    judged = rows[rows["k"] > 0].groupby(["corpus", "method"])["lost"].mean().unstack()
    zero = (
        rows[(rows["k"] == 0) & (rows["method"] == "label-free")]
        .set_index("corpus")[["lost", "rule"]]
        .rename(columns={"lost": "label_free"})
    )
    return judged.join(zero)
