"""The few-label answer judged on the answer benchmark's kept embeddings, leave one corpus out: the
accuracy posterior (:mod:`flare_core.choosing.accuracy_posterior`) that starts from the benchmark's prior
and reads the labels with the probe reading (:mod:`flare_core.choosing.probe_reading`), against the
label-free pick.

For each classification corpus, the prior is learned from the *other* corpora: the label-free rule
chosen on them (among the geometric scores the answer stage has) and its record by rank; so is the
reading of the labels (:mod:`flare_core.benchmark.reading_draws`). Seeded draws of random texts are
labelled with the corpus's own labels in batches of 16; after each batch every estimate names a model,
judged by the oracle (5-fold logistic regression on all texts). :func:`summary` gives, per k, the mean
points lost and the share within :data:`TOLERANCE` points, how often the named model changes between
batches, the calibration of the stated chance of being within the tolerance, how many draws are settled
and how many of those are within it, how often "n more labels would settle it" was said and came true,
and how often the stated 95% intervals held the accuracy with plenty of labels.

A variant is ``(prior, reading)`` (:data:`PRODUCT`, :data:`BEFORE`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from threadpoolctl import threadpool_limits

from flare_core.benchmark.answer_stage import chance_level, oracle_series, record_table
from flare_core.benchmark.embedding_store import load_kept
from flare_core.benchmark.reading_draws import all_rows, left_out_reading
from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.accuracy_posterior import estimate_frame, prior_by_rank
from flare_core.choosing.label_forecast import forecast
from flare_core.choosing.label_free_rules import choose_rule, ranked_by
from flare_core.choosing.probe_reading import ProbeReading
from flare_core.choosing.probes import probe_scores

KS = (16, 32, 48, 64, 80, 96, 112, 128)
#: The level of the intervals the answer states (``estimate_frame``'s 95%).
COVERAGE = 0.95
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


#: A variant is ``(prior, reading)``: the prior ("benchmark", "flat", "with models" or "<prior> x<f>", its
#: spreads times f) and how the labels are read ("learned": the probe reading learned on the other corpora;
#: "widened": the sampling error widened ``SPREAD_INFLATION`` times, no offset). The product's is
#: :data:`PRODUCT`; "before reading" is the posterior as it was before the learned reading.
PRODUCT = {"posterior": ("benchmark", "learned")}
BEFORE = {"before reading": ("benchmark", "widened")}
SHIPPED = "posterior"


def _frame(prior, correct, chance, seed, named_before=None, classes=2):
    return estimate_frame(
        prior,
        correct,
        tolerance_points=TOLERANCE,
        chance_level=chance,
        seed=seed,
        named_before=named_before,
        classes=classes,
    )


def prior_with_models(
    cases: Sequence[Mapping[str, Any]], base: ap.AccuracyPrior, *, least: int = 3
) -> ap.AccuracyPrior:
    """``base`` (a prior by rank) joined with each candidate's own record on the benchmark ``cases``: a
    candidate judged on at least ``least`` cases stood, on each, some points above the mean of the
    candidates the case shares with ``base``; the mean of those standings (its spread widened as
    :func:`~flare_core.choosing.accuracy_posterior.rank_record`'s, for one more corpus) is a second,
    independent reading of its standing, and the two are weighted by their precisions. A candidate the
    benchmark never judged keeps ``base``'s. An alternative judged beside the product's prior
    (``bench/studies/few_label_prior.py``), not the product's."""
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
    reading: ProbeReading | None = None,
    lines: ProbeReading | None = None,
) -> list[dict[str, Any]]:
    """One row per draw, k and estimate (and one for the label-free pick, k = 0) on the kept corpus
    ``name``; the prior learned from the other ``records``, the labels read with ``reading`` (learned on
    the other corpora) where a variant reads them "learned"."""
    record = records[name]
    cases, rule, ranked = left_out(name, records)
    candidates = record["candidates"]
    priors = _priors(cases, rule, ranked, candidates, {v[0] for v in variants.values()})
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    classes = int(np.unique(labels).size)
    oracle = oracle_series(record)
    chance = chance_level(record)
    read = {
        method: priors[which].read_with(_reading(how, lines if how.startswith(LINES) else reading))
        for method, (which, how) in variants.items()
    }
    rows, provisional = _before_labels(name, rule, ranked, oracle, candidates, read, chance)
    for draw in range(draws):
        order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
        named = dict(provisional)  # each batch keeps the model named before it unless its labels displace it
        for k in KS:
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2:
                continue
            scores = probe_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)[0]
            for method, prior in read.items():
                frame = _frame(prior, scores, chance, draw, named[method], classes)
                pick = named[method] = str(frame["model"].iloc[0])
                rows.append(_row(name, draw, k, method, frame, oracle, candidates, rule))
                if method == SHIPPED and not rows[-1]["settled"] and k in (16, 32, 64):
                    row = rows[-1]
                    row["more"] = forecast(
                        prior,
                        scores,
                        tolerance_points=TOLERANCE,
                        sure=SURE,
                        step=16,
                        most=256,
                        seed=draw,
                        classes=classes,
                    )
                    row["more_came_true"] = _came_true(
                        row["more"], order, k, labels, xs, prior, chance, draw, pick, classes
                    )
    return rows


def _before_labels(
    name: str,
    rule: str,
    ranked: list[str],
    oracle: pd.Series,
    candidates: list[str],
    read: Mapping[str, Any],
    chance: float,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The rows at k = 0 of corpus ``name``: the label-free pick, then each estimate's pick before any label
    (its prior's), with the model each estimate names before its first batch."""
    rows = [
        {
            "corpus": name,
            "draw": -1,
            "k": 0,
            "method": "label-free",
            "pick": ranked[0],
            "lost": lost(oracle, ranked[0], candidates),
            "rule": rule,
        }
    ]
    provisional = {}
    for method, prior in read.items():  # each estimate's pick before any label: its prior's
        frame = _frame(prior, None, chance, 0)
        pick = provisional[method] = str(frame["model"].iloc[0])
        rows.append(
            {
                "corpus": name,
                "draw": -1,
                "k": 0,
                "method": method,
                "pick": pick,
                "lost": lost(oracle, pick, candidates),
                "rule": rule,
                "p_within": float(frame["p_within"].iloc[0]),
            }
        )
    return rows, provisional


#: The readings learned with each model's own offset line too (the product's has the shared line alone).
LINES = "learned with each model's line"


def _lines(variants: Mapping[str, tuple]) -> bool:
    return any(how.startswith(LINES) for _, how in variants.values())


def _reading(how: str, reading: ProbeReading | None) -> ProbeReading | None:
    """The reading a variant names: "learned" (``reading``, the shared offset line), "learned with each
    model's line" (``reading`` learned with them; ", shared offset": their lines dropped once learned),
    "learned, no offset" (its spreads alone) or "widened" (None: the sampling error widened)."""
    if how == "widened" or reading is None:
        return None
    if how.endswith(", shared offset"):
        return replace(reading, own={})
    if how == "learned, no offset":
        return replace(reading, own={}, intercept=0.0, slope=0.0)
    return reading


def _priors(cases, rule, ranked, candidates, wanted) -> dict[str, ap.AccuracyPrior]:
    """The priors the variants name: "benchmark" (by rank), "flat", "with models", "<prior> x<f>"."""
    by_rank = prior_by_rank(cases, rule, ranked).reordered(candidates)
    priors = {
        "benchmark": by_rank,
        "flat": ap.AccuracyPrior.flat(candidates),
        "with models": prior_with_models(cases, by_rank),
    }
    for which in set(wanted) - set(priors):  # "<prior> x<f>": its spreads times f
        base, factor = which.rsplit(" x", 1)
        p = priors[base]
        priors[which] = ap.AccuracyPrior(
            p.models, p.mean, float(factor) * p.sd, p.level_mean, p.level_sd, p.source
        )
    return priors


def _row(name, draw, k, method, frame, oracle, candidates, rule) -> dict[str, Any]:
    """The record of one answer: its pick, the points it lost, its stated chance of being within the
    tolerance (and each model's, with what it lost), settled or not, and how many of the models' 95%
    intervals held their accuracy with plenty of labels."""
    pick = str(frame["model"].iloc[0])
    truth = oracle.loc[frame["model"]].to_numpy(dtype=np.float64)
    held = (frame["ci_low"].to_numpy() <= truth + 1e-9) & (truth <= frame["ci_high"].to_numpy() + 1e-9)
    return {
        "corpus": name,
        "draw": draw,
        "k": k,
        "method": method,
        "pick": pick,
        "lost": lost(oracle, pick, candidates),
        "rule": rule,
        "p_within": float(frame["p_within"].iloc[0]),
        "settled": bool(frame["p_within"].iloc[0] >= SURE),
        "stated": [
            [float(p), lost(oracle, str(m), candidates)]
            for m, p in zip(frame["model"], frame["p_within"], strict=True)
        ],
        "order": [str(m) for m in frame["model"]],
        "covered": float(held.mean()),
        "named_covered": bool(held[0]),
    }


def _came_true(more, order, k, labels, xs, prior, chance, draw, named, classes) -> bool | None:
    """Whether the draw, ``more`` labels later (the same seeded order), was settled (``named``: the model
    named now, kept unless those labels displace it)."""
    if more is None or k + more > labels.shape[0]:
        return None
    picked = order[: k + more]
    _, codes = np.unique(labels[picked], return_inverse=True)
    scores, _ = probe_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)
    frame = _frame(prior, scores, chance, draw, named, classes)
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
        {
            "method": method,
            "k": int(k),
            "mean_lost": float(g["lost"].mean()),
            "within": float((g["lost"] <= TOLERANCE).mean()),
            "draws": len(g),
        }
        for (method, k), g in rows[rows["k"] > 0].groupby(["method", "k"])
    ]
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
        pairs = [
            (p, lo <= TOLERANCE + 1e-9, c)
            for c, st in zip(post["corpus"], post["stated"], strict=True)
            for p, lo in st
        ]
        frame = pd.DataFrame(pairs, columns=["stated", "observed", "corpus"])
        frame["bin"] = pd.cut(frame["stated"], [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], include_lowest=True).astype(
            str
        )
        out["calibration"][method] = {
            "overall": _ece(frame),
            "per_corpus": {c: _ece(g) for c, g in frame.groupby("corpus")},
            "reliability": frame.groupby("bin")
            .agg(stated=("stated", "mean"), observed=("observed", "mean"), count=("stated", "size"))
            .reset_index()
            .to_dict(orient="records"),
        }
        settled = post[post["settled"].astype(bool)]
        out["settled"][method] = {
            "share_at_64": float(post[post["k"] == 64]["settled"].mean()),
            "share_at_128": float(post[post["k"] == 128]["settled"].mean()),
            "within_when_settled": float((settled["lost"] <= TOLERANCE).mean()) if len(settled) else None,
            "n_settled": len(settled),
        }
    post = rows[rows["method"] == SHIPPED]
    asked = (
        post[post["k"].isin((16, 32, 64)) & ~post["settled"].astype(bool)]
        if "settled" in post
        else post.iloc[0:0]
    )
    told = asked.dropna(subset=["more_came_true"]) if "more_came_true" in asked else asked.iloc[0:0]
    out["forecast"] = {
        "told": len(told),
        "unsettled": len(asked),
        "named": float(asked["more"].notna().mean()) if "more" in asked and len(asked) else None,
        "came_true": float(told["more_came_true"].mean()) if len(told) else None,
        "never": int(asked["more"].isna().sum()) if "more" in asked else 0,
    }
    judged = rows[(rows["k"] > 0) & rows["covered"].notna()] if "covered" in rows else rows.iloc[0:0]
    out["coverage"] = {
        method: {
            "nominal": COVERAGE,
            "measured": float(g["covered"].mean()),
            "named": float(g["named_covered"].astype(float).mean()),
        }
        for method, g in judged.groupby("method")
    }
    return out


def _ece(frame: pd.DataFrame) -> float:
    table = frame.groupby("bin").agg(
        stated=("stated", "mean"), observed=("observed", "mean"), n=("stated", "size")
    )
    return float((table["n"] * (table["stated"] - table["observed"]).abs()).sum() / table["n"].sum())


def judge_all(
    root: str,
    records: Mapping[str, dict],
    draws: int,
    seed: int = 0,
    variants: Mapping[str, tuple] = PRODUCT,
    learned: Sequence | None = None,
) -> pd.DataFrame:
    """:func:`judge_corpus` on every classification record, each prior learned from the other
    classification records alone, as the product's prior for a classifier is, and each reading of the
    labels learned on the other corpora (:mod:`flare_core.benchmark.reading_draws`; ``learned``: its rows
    when already drawn)."""
    own = {n: r for n, r in records.items() if r.get("oracle") == "accuracy"}
    if learned is None:
        reads = any(v[1].startswith("learned") for v in variants.values())
        learned = all_rows(root, own, seed=seed) if reads else []
    out = []
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: a second BLAS thread only waits
        for n in own:
            reading = left_out_reading(learned, n) if learned else None
            lines = left_out_reading(learned, n, own_lines=True) if learned and _lines(variants) else None
            out.extend(judge_corpus(root, n, own, draws, seed, variants, reading, lines))
    return pd.DataFrame(out)


def per_corpus(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean points lost per corpus and estimate, beside the label-free pick's and the rule it followed."""
    judged = rows[rows["k"] > 0].groupby(["corpus", "method"])["lost"].mean().unstack()
    zero = (
        rows[(rows["k"] == 0) & (rows["method"] == "label-free")]
        .set_index("corpus")[["lost", "rule"]]
        .rename(columns={"lost": "label_free"})
    )
    return judged.join(zero)
