"""Which texts to ask for, judged with the product's few-label answer on the answer benchmark's kept
embeddings, leave one corpus out.

For each classification corpus the answer is the accuracy posterior of
:func:`flare_core.benchmark.posterior_draws.judge_corpus`'s product variant (the benchmark's prior,
learned from the *other* corpora, updated by the leave-one-out probe's per-text scores), but the texts
are chosen batch by batch (:data:`BATCH` at a time, up to 128) by each of :data:`METHODS`:
:func:`~flare_core.choosing.label_choice.next_rows`' strategies, the random one being the seeded
permutation of the random-text study. After each batch the posterior names a model, judged by the
oracle; the rows have :func:`~flare_core.benchmark.posterior_draws.summary`'s columns, with ``method``
the text choice, and ``bias`` (the named model's estimate minus its oracle accuracy, points).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flare_core.benchmark.answer_stage import chance_level, oracle_series
from flare_core.benchmark.embedding_store import load_kept
from flare_core.benchmark.posterior_draws import KS, SURE, TOLERANCE, left_out, lost
from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.accuracy_posterior import estimate_frame, prior_by_rank
from flare_core.choosing.label_choice import next_rows
from flare_core.choosing.probes import probe_scores

BATCH = 16
#: The text choices judged: name -> (``next_rows`` strategy, the prior its choice reads: "benchmark"
#: (the answer's own) or "flat").
METHODS: dict[str, tuple[str, str]] = {
    "random": ("random", "flat"),
    "diverse": ("diverse", "flat"),
    "contest": ("contest", "flat"),
    "inform": ("inform", "benchmark"),
    "inform, flat prior": ("inform", "flat"),
}


def corpus_prior(name: str, records: Mapping[str, dict]) -> tuple[ap.AccuracyPrior, str, list[str]]:
    """The benchmark prior of corpus ``name`` as the posterior study learns it from the other
    ``records``, the label-free rule chosen there, and the candidates ranked by it."""
    cases, rule, ranked = left_out(name, records)
    return prior_by_rank(cases, rule, ranked).reordered(records[name]["candidates"]), rule, ranked


def judge_corpus(
    root: str,
    name: str,
    records: Mapping[str, dict],
    draws: int,
    seed: int = 0,
    methods: Mapping[str, tuple[str, str]] = METHODS,
    k_max: int = max(KS),
) -> list[dict[str, Any]]:
    """One row per draw, k (every batch up to ``k_max``) and text choice on the kept corpus ``name``."""
    record = records[name]
    candidates = record["candidates"]
    prior, rule, _ = corpus_prior(name, records)
    flat = ap.AccuracyPrior.flat(candidates)
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    texts = kept.bench.frame["text"].astype(str).tolist() if "text" in kept.bench.frame else None
    oracle = oracle_series(record)
    chance = chance_level(record)
    scorer = probe_scores
    rows: list[dict[str, Any]] = []
    for method, (strategy, which) in methods.items():
        for draw in range(draws):
            order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
            picked = np.zeros(0, dtype=np.int64)
            while picked.size < k_max:
                if strategy == "random":  # the random-text study's own draws
                    picked = order[: picked.size + BATCH]
                else:
                    new = next_rows(xs, picked, labels[picked].tolist(), BATCH, seed=1000 * seed + draw,
                                    strategy=strategy, texts=texts, prior=prior if which == "benchmark" else flat)  # fmt: skip
                    if new.size == 0:
                        break
                    picked = np.concatenate([picked, new])
                values, codes = np.unique(labels[picked], return_inverse=True)
                if values.size < 2:
                    continue
                scores, _ = scorer(xs, picked, codes.reshape(-1), "ridge", seed=draw)
                frame = estimate_frame(
                    prior, scores, tolerance_points=TOLERANCE, chance_level=chance, seed=draw
                )
                pick = str(frame["model"].iloc[0])
                row = {"corpus": name, "draw": draw, "k": int(picked.size), "method": method, "pick": pick,
                       "lost": lost(oracle, pick, candidates), "rule": rule,
                       "p_within": float(frame["p_within"].iloc[0]),
                       "bias": float(100.0 * (frame["estimate"].iloc[0] - oracle.loc[pick]))}  # fmt: skip
                row["settled"] = bool(row["p_within"] >= SURE)
                row["stated"] = [[float(p), lost(oracle, str(m), candidates)]
                                 for m, p in zip(frame["model"], frame["p_within"], strict=True)]  # fmt: skip
                rows.append(row)
    return rows


def matched(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the (corpus, draw, k) every text choice reached: a choice that ran out of distinct
    texts (or of a second class) is compared with the others only where it has a pick."""
    cells = rows.groupby(["corpus", "draw", "k"])["method"].transform("nunique")
    return rows[cells == rows["method"].nunique()]


def by_k(rows: pd.DataFrame, ks: tuple[int, ...]) -> pd.DataFrame:
    """Per text choice and k: mean points lost, share within :data:`TOLERANCE`, share settled and share
    of the settled within the tolerance, the named model's mean bias (points), and draws."""
    part = rows[rows["k"].isin(ks)]
    out = part.groupby(["method", "k"]).agg(
        mean_lost=("lost", "mean"),
        within=("lost", lambda s: float((s <= TOLERANCE).mean())),
        settled=("settled", "mean"),
        bias=("bias", "mean"),
        draws=("lost", "size"),
    )
    settled = part[part["settled"].astype(bool)]
    good = settled.groupby(["method", "k"])["lost"].apply(lambda s: float((s <= TOLERANCE).mean()))
    return out.join(good.rename("settled_within")).reset_index()


def nested_choice(rows: pd.DataFrame) -> pd.DataFrame:
    """For each corpus, the text choice with the fewest mean points lost (over every k) on the *other*
    corpora, and what it lost on this one (mean over k, and at each k)."""
    mean = rows.groupby(["corpus", "method"])["lost"].mean().unstack()
    out = []
    for corpus in mean.index:
        chosen = str(mean.drop(index=corpus).mean().idxmin())
        part = rows[(rows["corpus"] == corpus) & (rows["method"] == chosen)]
        out.append({"corpus": corpus, "chosen": chosen, "lost": float(part["lost"].mean()),
                    "random": float(mean.loc[corpus, "random"]) if "random" in mean else np.nan})  # fmt: skip
    return pd.DataFrame(out)
