"""The labels' benchmark: how well a choice of model made from labels holds on a labelled corpus.

Pure functions over ``{model: (N, d) embeddings}`` and the corpus's ``labels`` (N,), for
``flare benchmark`` to call on each classification corpus's stored run embeddings:

- :func:`few_label_draws`: seeded draws of k labelled texts, the user simulated by revealing the
  corpus's own labels in the order asked; for each draw and method, the model picked and the points it
  loses against the oracle (:func:`flare_core.choosing.validity.oracle_scores`, 5-fold logistic
  regression on all texts), and the stopping advice given after it;
- :func:`few_label_table`: those draws summed up, one row per (method, k): the share of draws within
  :data:`WITHIN_POINTS` of the best and the mean points lost; :func:`stopping_table`: among the draws
  where the advice said "settled", the share within those points;
- :func:`full_label_table`: the pick of :func:`~flare_core.choosing.probes.compare_with_labels` made on
  one half of the texts and judged on the other half, over several seeded splits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedShuffleSplit

from flare_core.checks import check_int
from flare_core.choosing import label_scores
from flare_core.choosing.label_choice import next_rows
from flare_core.choosing.probes import (
    check_embeddings,
    compare_with_labels,
    few_label_estimates,
)
from flare_core.choosing.stopping import stopping_advice
from flare_core.choosing.validity import oracle_scores, regret_points

KS = (16, 32, 48, 64, 128)
DRAWS = 30
BATCH = 16
WITHIN_POINTS = 2.0
#: The row choice judged against random texts (``"chosen"`` in the tables).
CHOSEN_STRATEGY = "contest"
#: The rows of the few-label table: (texts, estimator), in order.
METHODS = (
    ("chosen", "product"),
    ("random", "product"),
    ("random", "cv-lr"),
    ("random", "logme"),
    ("random", "knn-loo"),
)


def _single_scores(name: str) -> Callable[[dict[str, np.ndarray], np.ndarray, np.ndarray, int], np.ndarray]:
    """A single baseline as a function (unit embeddings, rows, codes, seed) -> score per model (M,)."""

    def cv(units, rows, y, seed):
        return np.array([label_scores.cv_correct(x[rows], y, seed=seed).mean() for x in units.values()])

    def logme(units, rows, y, seed):
        return np.array([label_scores.logme(x[rows], y) for x in units.values()])

    def knn(units, rows, y, seed):
        return np.array([label_scores.knn_loo_correct(x[rows], y).mean() for x in units.values()])

    return {"cv-lr": cv, "logme": logme, "knn-loo": knn}[name]


def _pick(models: list[str], scores: np.ndarray, rng: np.random.Generator) -> str:
    """The model with the highest score, ties broken at random (a listing order must not decide)."""
    top = np.flatnonzero(scores >= np.max(scores) - 1e-12)
    return models[int(rng.choice(top))]


def _chosen_order(embeddings: dict[str, np.ndarray], labels: np.ndarray, k_max: int, seed: int) -> np.ndarray:
    """The first ``k_max`` rows :data:`CHOSEN_STRATEGY` asks for, in batches of :data:`BATCH`, each batch
    chosen after the labels of the previous ones are revealed."""
    rows = np.zeros(0, dtype=np.int64)
    while rows.size < k_max:
        size = min(BATCH, k_max - rows.size)
        new = next_rows(embeddings, rows, labels[rows].tolist(), size, seed=seed, strategy=CHOSEN_STRATEGY)
        if new.size == 0:
            break
        rows = np.concatenate([rows, new])
    return rows


def few_label_draws(
    embeddings: Mapping[str, np.ndarray],
    labels: Sequence,
    *,
    ks: Sequence[int] = KS,
    draws: int = DRAWS,
    seed: int = 0,
    methods: Sequence[tuple[str, str]] = METHODS,
    oracle: pd.Series | None = None,
) -> pd.DataFrame:
    """One row per (draw, k, texts, estimator): ``pick``, ``points_lost``, ``within`` (<= 2 points) and,
    for the product's estimator, ``settled`` (the stopping advice), ``p_best`` and ``p_within`` of the pick,
    and every model's stated chances and oracle gap (``chances``: ``[[model, p_best, p_within, points
    lost], …]``, read by :func:`reliability_table`).

    Draw ``i`` of random texts takes the first k rows of one seeded permutation, so its k are nested;
    draw ``i`` of chosen texts follows the product's batches. ``oracle`` (model -> accuracy) defaults to
    :func:`oracle_scores`' accuracy on all texts.
    """
    xs = check_embeddings(embeddings)
    labels = np.asarray(labels).astype(str)
    draws = check_int(draws, "draws", min_value=1)
    models = list(xs)
    if oracle is None:
        oracle = oracle_scores(xs, labels=labels.tolist(), seed=seed)["accuracy"]
    units = {m: label_scores.unit_rows(x) for m, x in xs.items()}
    k_max = max(ks)
    records = []
    for draw in range(draws):
        orders = {"random": np.random.default_rng([seed, draw]).permutation(labels.shape[0])[:k_max]}
        if any(texts == "chosen" for texts, _ in methods):
            orders["chosen"] = _chosen_order(xs, labels, k_max, seed=seed * 1000 + draw)
        for k in ks:
            for texts, estimator in methods:
                rows = orders[texts][:k]
                codes = np.unique(labels[rows], return_inverse=True)[1].reshape(-1)
                record = {"draw": draw, "k": k, "texts": texts, "estimator": estimator}
                rng = np.random.default_rng([seed, draw, k])
                if np.unique(codes).size < 2:
                    pick, extra = _pick(models, np.zeros(len(models)), rng), {"settled": False}
                elif estimator == "product":
                    frame = few_label_estimates(xs, rows, labels[rows].tolist(), seed=draw)
                    advice = stopping_advice(frame, k)
                    pick = advice["best"]
                    lead = frame.set_index("model").loc[pick]
                    extra = {
                        "settled": advice["settled"],
                        "p_best": float(lead["p_best"]),
                        "p_within": float(lead["p_within"]),
                        "chances": [
                            [
                                str(r.model),
                                float(r.p_best),
                                float(r.p_within),
                                regret_points(oracle, str(r.model), models),
                            ]
                            for r in frame.itertuples(index=False)
                        ],
                    }
                else:
                    pick, extra = _pick(models, _single_scores(estimator)(units, rows, codes, draw), rng), {}
                lost = regret_points(oracle, pick, models)
                records.append(
                    {**record, "pick": pick, "points_lost": lost, "within": lost <= WITHIN_POINTS, **extra}
                )
    return pd.DataFrame(records)


def few_label_table(draws: pd.DataFrame) -> pd.DataFrame:
    """Per (texts, estimator, k): ``share_within`` (of draws within :data:`WITHIN_POINTS`),
    ``mean_points_lost`` and ``draws``."""
    grouped = draws.groupby(["texts", "estimator", "k"], sort=False)
    return grouped.agg(
        share_within=("within", "mean"), mean_points_lost=("points_lost", "mean"), draws=("within", "size")
    ).reset_index()


def stopping_table(draws: pd.DataFrame, texts: str = "random") -> pd.DataFrame:
    """Per k, for the product's estimator on ``texts`` (``"random"``, the product's default, or
    ``"chosen"``): ``share_settled`` and, among the settled draws, ``settled_within`` (share within
    :data:`WITHIN_POINTS`; NaN when none settled)."""
    product = draws[(draws["estimator"] == "product") & (draws["texts"] == texts)]
    rows = []
    for k, group in product.groupby("k"):
        settled = group[group["settled"].astype(bool)]
        rows.append(
            {
                "k": int(k),
                "share_settled": float(len(settled) / len(group)),
                "settled_within": float(settled["within"].mean()) if len(settled) else float("nan"),
                "n_settled": int(len(settled)),
            }
        )
    return pd.DataFrame(rows)


#: The bins of stated chances in :func:`reliability_table`.
CHANCE_BINS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def reliability_table(
    draws: pd.DataFrame, chance: str = "p_within", points: float = 1.0
) -> tuple[pd.DataFrame, float]:
    """How often what the product states comes true: every model of every product draw, its stated
    ``chance`` (``"p_within"``: of being within ``points`` of the best; ``"p_best"``: of being the best)
    binned by :data:`CHANCE_BINS`, against the share of those models within ``points`` of the best on the
    full labels. Returns the table (``bin``, ``stated`` mean, ``observed`` share, ``count``) and the expected
    calibration error (the count-weighted mean of ``|stated - observed|``)."""
    rows = []
    for chances in draws.get("chances", pd.Series(dtype=object)).dropna():
        for _model, p_best, p_within, lost in chances:
            stated = p_within if chance == "p_within" else p_best
            rows.append((float(stated), float(lost) <= points + 1e-9))
    if not rows:
        return pd.DataFrame(columns=["bin", "stated", "observed", "count"]), float("nan")
    frame = pd.DataFrame(rows, columns=["stated", "observed"])
    edges = np.asarray(CHANCE_BINS)
    frame["bin"] = pd.cut(frame["stated"], edges, include_lowest=True).astype(str)
    table = (
        frame.groupby("bin", sort=False, observed=True)
        .agg(stated=("stated", "mean"), observed=("observed", "mean"), count=("stated", "size"))
        .reset_index()
        .sort_values("stated")
        .reset_index(drop=True)
    )
    ece = float((table["count"] * (table["stated"] - table["observed"]).abs()).sum() / table["count"].sum())
    return table, ece


def full_label_table(
    embeddings: Mapping[str, np.ndarray], labels: Sequence, *, splits: int = 5, seed: int = 0
) -> pd.DataFrame:
    """One row per seeded half/half split: the pick of :func:`compare_with_labels` on one half (``pick``;
    ``tied``: the models it named as tied with it), judged on the other half twice:

    - ``points_lost``: by the oracle of ``flare benchmark`` there (5-fold logistic regression, C = 1);
    - ``points_lost_tuned``: by :func:`compare_with_labels` run on the judging half (C chosen inside its
      folds, as the pick was made), so that a model that needs another C than 1 is not judged by a
      setting the pick never used;

    and ``best_tied_lost`` (by the oracle): the best model of the named tie, what a user choosing within
    the tie could at best reach."""
    xs = check_embeddings(embeddings)
    labels = np.asarray(labels).astype(str)
    splits = check_int(splits, "splits", min_value=1)
    models = list(xs)
    halves = StratifiedShuffleSplit(splits, test_size=0.5, random_state=seed).split(labels, labels)
    rows = []
    for i, (pick_half, judge_half) in enumerate(halves):
        frame = compare_with_labels(
            {m: x[pick_half] for m, x in xs.items()}, labels[pick_half], seed=seed + i
        )
        judge_xs = {m: x[judge_half] for m, x in xs.items()}
        judge = oracle_scores(judge_xs, labels=labels[judge_half].tolist(), seed=seed)["accuracy"]
        tuned = compare_with_labels(judge_xs, labels[judge_half], seed=seed + i).set_index("model")[
            "accuracy"
        ]
        pick = frame.attrs["best"]
        tied = frame.loc[frame["tied"], "model"].tolist()
        rows.append(
            {
                "split": i,
                "pick": pick,
                "tied": tied,
                "points_lost": regret_points(judge, pick, models),
                "points_lost_tuned": regret_points(tuned, pick, models),
                "best_tied_lost": min(regret_points(judge, m, models) for m in [pick, *tied]),
            }
        )
    return pd.DataFrame(rows)
