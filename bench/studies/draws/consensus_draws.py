"""Does the candidates' consensus on the unlabelled texts help the few-label pick? A CODA-style study
(ICCV 2025) judged on the answer benchmark's kept embeddings, leave one corpus out, beside the shipped
accuracy posterior (:mod:`flare_core.choosing.accuracy_posterior`) on the same draws and texts.

For a draw's k labelled rows each candidate m fits the ridge probe of the product (one-hot targets on
L2-normalised rows, penalty :data:`~flare_core.choosing.probes.RIDGE_PENALTY`, centred as
:func:`~flare_core.choosing.label_scores.ridge_loo_scores`) and predicts all N texts. The consensus of a
text is the majority vote of the M candidates (``"consensus"``), or their vote weighted by each one's
chance of being best under the shipped posterior (``"consensus weighted"``). A candidate's agreement
``c_m`` with it over the unlabelled texts, centred (``c − mean c``), is a second measurement of its
standing above the candidates' mean: ``z = β(k) (c − mean c) = H a + ε``, ``H = I − 11ᵀ/M``,
``ε ~ N(0, σ²(k) H)``. ``β(k)`` and ``σ²(k)`` are learned on the *other* corpora at the same k (the
oracle standing regressed on the consensus standing through the origin, pooled over draws), so nothing
of the judged corpus enters them. The shipped posterior ``N(μ, Q)`` is then updated by ``z`` (a Kalman
step on M − 1 coordinates, the last dropped, as ``z`` sums to zero) and every figure is read from draws
of the result as :func:`~flare_core.choosing.accuracy_posterior.estimate_frame` reads them.

Two passes: :func:`first_pass` judges the shipped posterior and keeps, per (corpus, draw, k), its
``(μ, Q)``, its chance of being best and both consensus standings; :func:`second_pass` learns β and σ²
leave one corpus out and judges the consensus variants. The rows carry what
:func:`flare_core.benchmark.posterior_draws.summary` reads. Shapes: M candidates, N texts, k labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from flare_core.benchmark.answer_stage import chance_level, oracle_series
from flare_core.benchmark.embedding_store import load_kept
from flare_core.benchmark.posterior_draws import KS, SHIPPED, SURE, TOLERANCE, left_out, lost
from flare_core.choosing import accuracy_posterior as ap
from flare_core.choosing.label_scores import unit_rows
from flare_core.choosing.probes import RIDGE_PENALTY, probe_scores

#: The consensus variants: the plain majority vote and the vote weighted by the chance of being best.
VARIANTS = {"consensus": "plain", "consensus weighted": "weighted"}
#: The smallest residual variance a link is given (shares²): a link is never taken as exact.
MIN_VARIANCE = 1e-6


def ridge_predictions(units: np.ndarray, rows: np.ndarray, codes: np.ndarray, penalty: float) -> np.ndarray:
    """The classes (N,) a ridge classifier on one-hot targets, fitted on the labelled ``rows`` (k,) of
    the unit rows ``units`` (N, d) with class codes ``codes`` (k,), predicts for every text.

    As :func:`~flare_core.choosing.label_scores.ridge_loo_scores`: features and targets centred on the
    labelled rows, the intercept unpenalised, solved in the k × k kernel."""
    x = units[rows]
    centre = x.mean(axis=0)
    xc = x - centre
    onehot = np.eye(int(codes.max()) + 1)[codes]
    target_mean = onehot.mean(axis=0)
    dual = np.linalg.solve(xc @ xc.T + penalty * np.eye(rows.shape[0]), onehot - target_mean)  # (k, C)
    scores = ((units - centre) @ xc.T) @ dual + target_mean  # (N, C)
    return scores.argmax(axis=1)


def consensus_standing(
    predictions: np.ndarray, labelled: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Each candidate's agreement with the consensus minus the candidates' mean (M,), over the texts not
    in ``labelled`` (k,). ``predictions`` (N, M) are each candidate's class codes; the consensus of a text
    is the class with the most votes, each candidate's vote weighted by ``weights`` (M,; default 1),
    ties to the class of the lowest-indexed candidate among the tied."""
    n, m = predictions.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    classes = int(predictions.max()) + 1
    votes = np.zeros((n, classes))
    scale = max(float(np.abs(w).max()), 1e-12)
    for j in range(m):  # the tie-break: a vanishing extra vote, larger for a lower index
        np.add.at(votes, (np.arange(n), predictions[:, j]), w[j] + 1e-9 * scale * (m - j) / m)
    consensus = votes.argmax(axis=1)
    unlabelled = np.ones(n, dtype=bool)
    unlabelled[labelled] = False
    agree = (predictions[unlabelled] == consensus[unlabelled, None]).mean(axis=0)
    return agree - agree.mean()


def fit_link(cases: pd.DataFrame, corpus: str, k: int, column: str) -> tuple[float, float, int]:
    """``(β, σ², n)`` of the link between ``column`` (a consensus standing (M,) per row of ``cases``) and
    the oracle standing (``oracle_standing``, (M,)) on every corpus but ``corpus`` at ``k`` labels: the
    slope through the origin of the oracle standing on the consensus one, pooled over corpora and
    draws, and the residual variance per candidate (each case has M − 1 degrees of freedom, its
    standings summing to zero). ``n`` is the number of cases read; the judged corpus is never read."""
    others = cases[(cases["corpus"] != corpus) & (cases["k"] == k)]
    if others.empty:
        return 0.0, 1.0, 0
    z = np.concatenate(others[column].to_list())
    y = np.concatenate(others["oracle_standing"].to_list())
    beta = float(z @ y / max(float(z @ z), 1e-12))
    freedom = sum(len(s) - 1 for s in others[column]) - 1
    variance = float(((y - beta * z) ** 2).sum() / max(freedom, 1))
    return beta, max(variance, MIN_VARIANCE), len(others)


def observe(
    mean: np.ndarray, cov: np.ndarray, standing: np.ndarray, beta: float, variance: float
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior ``N(mean, cov)`` (M,), (M, M) updated by the consensus ``standing`` (M,):
    ``z = β standing = H a + ε``, ``H = I − 11ᵀ/M``, ``ε ~ N(0, σ² H)``; ``z`` sums to zero, so the last
    coordinate is dropped and the step is a Kalman one on the other M − 1."""
    m = mean.shape[0]
    if m < 2:
        return mean, cov
    h = (np.eye(m) - 1.0 / m)[:-1]  # (M − 1, M)
    z = beta * np.asarray(standing, dtype=np.float64)[:-1]
    r = variance * (np.eye(m) - 1.0 / m)[:-1, :-1]
    innovation = h @ cov @ h.T + r
    gain = np.linalg.solve(innovation, h @ cov).T  # cov Hᵀ (H cov Hᵀ + R)⁻¹, (M, M − 1)
    new_cov = cov - gain @ h @ cov
    return mean + gain @ (z - h @ mean), 0.5 * (new_cov + new_cov.T)


def frame_of(
    models: Sequence[str], mean: np.ndarray, cov: np.ndarray, chance: float, seed: int
) -> pd.DataFrame:
    """One row per candidate, best first, with ``model``, ``estimate``, ``p_best`` and ``p_within`` (of
    :data:`TOLERANCE` points), read from the posterior ``N(mean, cov)`` exactly as
    :func:`~flare_core.choosing.accuracy_posterior.estimate_frame` reads its own (same draws, same order)."""
    raw = ap.draws_of(mean, cov, seed)
    p_best, p_within = ap.chances(raw, TOLERANCE)
    frame = pd.DataFrame(
        {
            "model": list(models),
            "estimate": np.clip(mean, chance, 1.0),
            "p_best": p_best,
            "p_within": p_within,
        }
    )
    return frame.iloc[np.lexsort((-frame["p_best"].to_numpy(), -mean))].reset_index(drop=True)


def judged_row(
    frame: pd.DataFrame, where: Mapping[str, Any], method: str, oracle: pd.Series, candidates: Sequence[str]
) -> dict[str, Any]:
    """The row :func:`~flare_core.benchmark.posterior_draws.summary` reads for one pick: ``where`` holds
    ``corpus``, ``draw``, ``k`` and ``rule``; the pick is ``frame``'s first model."""
    pick = str(frame["model"].iloc[0])
    p_within = float(frame["p_within"].iloc[0])
    stated = [
        [float(p), lost(oracle, str(m), candidates)]
        for m, p in zip(frame["model"], frame["p_within"], strict=True)
    ]
    return {
        "corpus": where["corpus"], "draw": int(where["draw"]), "k": int(where["k"]), "method": method,
        "pick": pick, "lost": lost(oracle, pick, candidates), "rule": where["rule"], "p_within": p_within,
        "settled": bool(p_within >= SURE), "stated": stated, "order": [str(m) for m in frame["model"]],
    }  # fmt: skip


def _corpus_inputs(root: str, name: str, records: Mapping[str, dict]) -> dict[str, Any]:
    """What every draw of corpus ``name`` reads: its record's candidates, oracle and chance level, the
    prior learned from the other ``records`` and the rule it follows, the vectors ``xs`` (N, d) of each
    candidate and their unit rows, and the texts' labels (N,)."""
    record = records[name]
    cases, rule, ranked = left_out(name, records)
    candidates = list(record["candidates"])
    kept = load_kept(root, name, candidates)
    oracle = oracle_series(record)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    return {
        "candidates": candidates, "rule": rule, "ranked": ranked, "oracle": oracle,
        "chance": chance_level(record), "prior": ap.prior_by_rank(cases, rule, ranked).reordered(candidates),
        "xs": xs, "units": [unit_rows(x) for x in xs.values()],
        "labels": kept.bench.frame["label"].astype(str).to_numpy(),
        "oracle_standing": (oracle.loc[candidates] - oracle.loc[candidates].mean()).to_numpy(),
    }  # fmt: skip


def first_pass(
    root: str, name: str, records: Mapping[str, dict], draws: int, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Corpus ``name`` (its prior learned from the other ``records``): the rows of the label-free pick
    (k = 0) and of the shipped posterior (:data:`~flare_core.benchmark.posterior_draws.SHIPPED`) on each
    draw and k of :data:`~flare_core.benchmark.posterior_draws.KS`, the draws seeded as
    :func:`~flare_core.benchmark.posterior_draws.judge_corpus` seeds them; and one case per draw and k
    for :func:`second_pass`: the posterior's ``mean`` (M,) and ``cov`` (M, M), the consensus standings
    ``plain`` and ``weighted`` (M,), the ``oracle_standing`` (M,) and what judging a pick needs."""
    inputs = _corpus_inputs(root, name, records)
    candidates, oracle, labels = inputs["candidates"], inputs["oracle"], inputs["labels"]
    xs = inputs["xs"]
    ranked, rule = inputs["ranked"], inputs["rule"]
    rows = [{"corpus": name, "draw": -1, "k": 0, "method": "label-free", "pick": ranked[0],
             "lost": lost(oracle, ranked[0], candidates), "rule": rule}]  # fmt: skip
    cases = []
    for draw in range(draws):
        order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
        for k in KS:
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2:
                continue
            codes = codes.reshape(-1)
            correct = probe_scores(xs, picked, codes, "ridge", seed=draw)[0]
            mean, cov = ap.posterior(inputs["prior"], correct)
            frame = frame_of(candidates, mean, cov, inputs["chance"], draw)
            where = {"corpus": name, "draw": draw, "k": k, "rule": rule}
            rows.append(judged_row(frame, where, SHIPPED, oracle, candidates))
            predictions = np.stack(
                [ridge_predictions(u, picked, codes, RIDGE_PENALTY) for u in inputs["units"]], axis=1
            )
            p_best = frame.set_index("model")["p_best"].loc[candidates].to_numpy()
            cases.append(
                {
                    **where,
                    "mean": mean,
                    "cov": cov,
                    "candidates": candidates,
                    "oracle": oracle,
                    "chance": inputs["chance"],
                    "oracle_standing": inputs["oracle_standing"],
                    "plain": consensus_standing(predictions, picked),
                    "weighted": consensus_standing(predictions, picked, p_best),
                }  # fmt: skip
            )
    return rows, cases


def second_pass(cases: pd.DataFrame) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Every case of :func:`first_pass` (one per corpus, draw and k) judged with each consensus variant
    of :data:`VARIANTS`, its link (β, σ²) learned at the same k on the other corpora only; returns the
    rows and the links (one row per corpus, k and variant: ``beta``, ``variance``, ``n``)."""
    links = {
        (corpus, k, column): fit_link(cases, corpus, k, column)
        for corpus in cases["corpus"].unique()
        for k in cases["k"].unique()
        for column in VARIANTS.values()
    }
    rows = []
    for case in cases.to_dict(orient="records"):
        for method, column in VARIANTS.items():
            beta, variance, _ = links[(case["corpus"], case["k"], column)]
            mean, cov = observe(case["mean"], case["cov"], case[column], beta, variance)
            frame = frame_of(case["candidates"], mean, cov, case["chance"], case["draw"])
            rows.append(judged_row(frame, case, method, case["oracle"], case["candidates"]))
    table = pd.DataFrame(
        [
            {"corpus": c, "k": int(k), "variant": v, "beta": b, "variance": s, "n": n}
            for (c, k, v), (b, s, n) in links.items()
        ]  # fmt: skip
    )
    return rows, table


def link_summary(links: pd.DataFrame) -> pd.DataFrame:
    """The links of :func:`second_pass` by k and variant, over the left-out folds: the mean ``beta``
    (points of oracle standing per point of agreement standing), ``sigma_points`` (the residual spread,
    points) and their ranges over the folds."""
    frame = links.assign(sigma_points=100.0 * np.sqrt(links["variance"]))
    return frame.groupby(["variant", "k"]).agg(
        beta=("beta", "mean"), beta_min=("beta", "min"), beta_max=("beta", "max"),
        sigma_points=("sigma_points", "mean"), sigma_min=("sigma_points", "min"),
        sigma_max=("sigma_points", "max"),
    )  # fmt: skip


def fit_quality(cases: pd.DataFrame) -> pd.DataFrame:
    """How well each consensus standing tracks the oracle standing by k (in sample, every corpus): the
    correlation of the pooled standings, and the share of cases whose consensus leader is the oracle's
    best or within :data:`TOLERANCE` points of it."""
    out = []
    for k, group in cases.groupby("k"):
        y = np.concatenate(group["oracle_standing"].to_list())
        row: dict[str, Any] = {"k": int(k)}
        for column in VARIANTS.values():
            z = np.concatenate(group[column].to_list())
            row[f"{column}_corr"] = float(np.corrcoef(z, y)[0, 1])
            gaps = [
                100.0 * (o.max() - o[int(np.argmax(s))])
                for s, o in zip(group[column], group["oracle_standing"], strict=True)
            ]
            row[f"{column}_leader_within"] = float(np.mean(np.asarray(gaps) <= TOLERANCE))
        out.append(row)
    return pd.DataFrame(out).set_index("k")


def judge_all(
    root: str, records: Mapping[str, dict], names: Sequence[str], draws: int, seed: int = 0, log: Any = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Both passes on the corpora ``names`` (each one's prior from the other ``records``): the rows of
    every method (for :func:`~flare_core.benchmark.posterior_draws.summary`), the links and the cases."""
    rows: list[dict[str, Any]] = []
    cases: list[dict[str, Any]] = []
    for name in names:
        got, kept = first_pass(root, name, records, draws, seed)
        rows += got
        cases += kept
        if log is not None:
            log(name)
    table = pd.DataFrame(cases)
    judged, links = second_pass(table)
    return pd.DataFrame(rows + judged), links, table
