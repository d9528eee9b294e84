"""Study: why the full-label pick falls short of the benchmark's oracle on some corpora.

The full-label check of ``flare benchmark`` (:func:`flare_core.benchmark.label_draws.full_label_table`)
picks a model with :func:`~flare_core.choosing.probes.compare_with_labels` on one half of a corpus and
judges the pick on the other half by the oracle (:func:`~flare_core.choosing.validity.oracle_scores`).
The two differ in more than the texts, so this study judges every pick several ways on the same half:

- ``oracle before``: the oracle as it was (5-fold logistic regression, C = 1, on the raw vectors);
- ``unit C=1``: the same on L2-normalised rows (what normalisation alone changes);
- ``oracle``: the oracle of the installed :func:`~flare_core.choosing.downstream.classification`;
- ``raw tuned``: C chosen inside the folds as the product does, on the raw vectors;
- ``product``: the product's own probe (L2-normalised rows, C chosen inside the folds, 5 folds × 2);
- ``product F1``: the product's probe judged by macro-F1 instead of accuracy.

What the oracle loses and the product's own probe does not is the probe's difference; what the product's
probe loses on the judging half is the noise of two halves (the pick's named tie says whether it was
within the pick's own interval). On all the texts, the product's pick is also judged by the oracle on the
same texts (no noise of halves), with each model's C as the product chooses it.

Usage::

    .venv/bin/python bench/studies/full_label_diagnosis.py [--corpora sms-spam,debates-2016] [--models a,b,...]
        [--splits 5] [--cache-dir runs/.bench-emb-cache] [--out rows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedShuffleSplit, cross_val_score

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from few_labels import classification_corpora, frame_markdown  # noqa: E402
from label_free_scores import corpus_embeddings  # noqa: E402

from flare_core.benchmark.suite import BENCHMARK_MAX_LENGTH, default_models  # noqa: E402
from flare_core.choosing import probes  # noqa: E402
from flare_core.choosing.downstream import _classification_folds, classification  # noqa: E402
from flare_core.choosing.label_scores import folds as make_folds  # noqa: E402
from flare_core.choosing.label_scores import unit_rows  # noqa: E402
from flare_core.choosing.probes import compare_with_labels  # noqa: E402
from flare_core.choosing.validity import regret_points  # noqa: E402
from flare_core.encoders import get_spec  # noqa: E402


def _codes(labels: np.ndarray) -> np.ndarray:
    return np.unique(labels, return_inverse=True)[1]


def raw_tuned(x: np.ndarray, labels: np.ndarray, seed: int) -> float:
    """Accuracy of the product's nested choice of C (5 folds × 2 repeats) on the raw vectors."""
    y = _codes(labels)
    accs = []
    for r in range(probes.REPEATS):
        folds = make_folds(y, probes.FOLDS, seed + r)
        accs.append(float(np.mean(probes._nested_predictions(x, y, folds, seed) == y)))
    return float(np.mean(accs))


def chosen_c(x: np.ndarray, labels: np.ndarray, seed: int = 0) -> str:
    """The C of the grid the product chooses in each of its outer training folds (the most frequent,
    with how often)."""
    y = _codes(labels)
    unit = unit_rows(x)
    choices = Counter(
        probes._inner_choice(unit[train], y[train], seed)
        for r in range(probes.REPEATS)
        for train, _ in make_folds(y, probes.FOLDS, seed + r)
    )
    c, n = choices.most_common(1)[0]
    return f"{c:g} ({n}/{sum(choices.values())})"


def fixed_penalty(x: np.ndarray, labels: np.ndarray) -> float:
    """The oracle's accuracy as it was: logistic regression, C = 1, on ``x`` as given, its folds."""
    xs, ys, cv, _ = _classification_folds(x, labels, 5, 0)
    return float(cross_val_score(LogisticRegression(max_iter=1000), xs, ys, cv=cv).mean())


def judges(xs: dict[str, np.ndarray], labels: np.ndarray, seed: int) -> dict[str, pd.Series]:
    """Every judge of the module docstring, each a score per model."""
    product = compare_with_labels(xs, labels, seed=seed).set_index("model")
    return {
        "oracle before": pd.Series({m: fixed_penalty(x, labels) for m, x in xs.items()}),
        "unit C=1": pd.Series({m: fixed_penalty(unit_rows(x), labels) for m, x in xs.items()}),
        "oracle": pd.Series({m: classification(x, labels, seed=0)["accuracy"] for m, x in xs.items()}),
        "raw tuned": pd.Series({m: raw_tuned(x, labels, seed) for m, x in xs.items()}),
        "product": product["accuracy"],
        "product F1": product["f1_macro"],
    }  # fmt: skip


def corpus_rows(
    name: str, models: list[str], cache_dir: Path, splits: int
) -> tuple[list[dict], pd.DataFrame]:
    bench, xs = corpus_embeddings(name, models, cache_dir, BENCHMARK_MAX_LENGTH)
    labels = bench.frame["label"].astype(str).to_numpy()
    rows = []
    halves = StratifiedShuffleSplit(splits, test_size=0.5, random_state=0).split(labels, labels)
    for i, (pick_half, judge_half) in enumerate(halves):
        frame = compare_with_labels({m: x[pick_half] for m, x in xs.items()}, labels[pick_half], seed=i)
        pick = frame.attrs["best"]
        tied = frame.loc[frame["tied"], "model"].tolist()
        judged = judges({m: x[judge_half] for m, x in xs.items()}, labels[judge_half], seed=i)
        row = {"corpus": name, "split": str(i), "pick": pick, "tied": len(tied)}
        for judge, scores in judged.items():
            row[judge] = regret_points(scores, pick, models)
        oracle_best = judged["oracle"].idxmax()
        row["oracle's best"] = oracle_best
        row["in the named tie"] = oracle_best in [pick, *tied]
        row["before: in the tie"] = judged["oracle before"].idxmax() in [pick, *tied]
        rows.append(row)
    frame = compare_with_labels(xs, labels, seed=0)
    pick = frame.attrs["best"]
    tied = frame.loc[frame["tied"], "model"].tolist()
    judged = judges(xs, labels, seed=0)
    row = {"corpus": name, "split": "all texts", "pick": pick, "tied": len(tied)}
    for judge, scores in judged.items():
        row[judge] = regret_points(scores, pick, models)
    row["oracle's best"] = judged["oracle"].idxmax()
    row["in the named tie"] = row["oracle's best"] in [pick, *tied]
    row["before: in the tie"] = judged["oracle before"].idxmax() in [pick, *tied]
    rows.append(row)
    per_model = pd.DataFrame({"corpus": name, **{j: 100 * s for j, s in judged.items()}})
    per_model["C chosen"] = [chosen_c(xs[m], labels) for m in per_model.index]
    per_model["mean |cos|"] = [_mean_cosine(xs[m]) for m in per_model.index]
    return rows, per_model.rename_axis("model").reset_index()


def _mean_cosine(x: np.ndarray) -> float:
    """Mean cosine between distinct rows (of at most 500): how narrow a cone the vectors fill."""
    unit = unit_rows(x[:500])
    sims = unit @ unit.T
    n = sims.shape[0]
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora", default=None, help="comma-separated; default: every classification corpus"
    )
    parser.add_argument("--models", default=None, help="comma-separated; default: the benchmark's candidates")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.bench-emb-cache"))
    parser.add_argument("--out", type=Path, default=None, help="also keep the rows in this JSON file")
    args = parser.parse_args(argv)
    names = args.corpora.split(",") if args.corpora else classification_corpora()
    models = (
        args.models.split(",")
        if args.models
        else [m for m in default_models() if get_spec(m).role == "candidate"]
    )
    rows, per_model = [], []
    for name in names:
        start = time.perf_counter()
        corpus, models_frame = corpus_rows(name, models, args.cache_dir, args.splits)
        rows += corpus
        per_model.append(models_frame)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {"splits": rows, "models": pd.concat(per_model).to_dict(orient="records")}, default=str
            ),
            encoding="utf-8",
        )
    print("## Points lost by the pick, per judge\n")
    print(frame_markdown(table))
    print("\n## Mean over the half/half splits\n")
    halves = table[table["split"] != "all texts"]
    judges_ = ["oracle before", "unit C=1", "oracle", "raw tuned", "product", "product F1"]
    means = halves.groupby("corpus", sort=False)[judges_].mean()
    for column in ("in the named tie", "before: in the tie"):
        means[column] = halves.groupby("corpus", sort=False)[column].sum()
    print(frame_markdown(means.reset_index()))
    print("\n## Each model on all the texts (accuracy %, C chosen by the product)\n")
    print(frame_markdown(pd.concat(per_model)))


if __name__ == "__main__":
    main()
