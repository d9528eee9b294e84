"""Study: which stopping rule makes the few-label advice calibrated, chosen leave-one-corpus-out.

For every classification corpus of the benchmark (embeddings cached by ``bench/studies/label_free_scores.py``)
and every seeded draw of random texts (the draws of :func:`flare_core.benchmark.label_draws.few_label_draws`),
the product's leave-one-out margins and extrapolated correctness are computed once per k; each candidate
rule then says "settled" or not from statistics of them, and is judged by the share of settled draws
whose pick is within 2 points of the oracle's best model. Candidates (each a small grid):

- ``inflate``: the bootstrap spread of the margins multiplied by f before asking for SETTLED_P;
- ``agree``: the leader also within 2 points of the best by the extrapolated accuracy in >= q of draws;
- ``min-labels``: no settling before m labels;
- ``per-class``: no settling before m labels per class;
- ``above-chance``: the leader's 95% accuracy interval starting >= d above 1 / classes;
- ``above-chance+per-class``: both (the rule of :func:`~flare_core.analyses.stopping.stopping_advice`).

Each family's parameter is chosen leave-one-corpus-out: for each corpus, among the parameters whose
mean settled share at k = 128 on the other corpora is at least 30%, the one with every other corpus at
>= 90% within 2 points (the most often settling of those), or else the one with the best worst corpus;
the held-out corpus is judged by it.

Usage::

    .venv/bin/python bench/studies/few_label_stopping.py [--draws 30] [--cache-dir runs/.bench-emb-cache]
        [--corpora bbc-news,...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from few_labels import classification_corpora  # noqa: E402
from label_free_scores import corpus_embeddings  # noqa: E402

from flare_core.analyses import probes, stopping  # noqa: E402
from flare_core.analyses.validity import oracle_scores, regret_points  # noqa: E402
from flare_core.benchmark.label_draws import KS, WITHIN_POINTS  # noqa: E402
from flare_core.benchmark.suite import BENCHMARK_MAX_LENGTH, default_models  # noqa: E402
from flare_core.encoders import get_spec  # noqa: E402

FLOOR_SHARE = 0.3
#: The margin rule the floors are studied with: the leader's mean margin within this of the highest in at
#: least this share of the bootstrap draws (the answer itself reads the chance of being within 1 point,
#: ``bench/studies/few_label_answer.py``).
MARGIN_NEAR, MARGIN_SETTLED_P = 0.04, 0.95
INFLATE = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0)


def _p_near(
    values: np.ndarray, sample: np.ndarray, leader: int, margin: float, inflate: float = 1.0
) -> float:
    """The leader's chance of a resampled mean within ``margin`` of the highest, the spread × ``inflate``."""
    means = values[sample].mean(axis=1)
    centre = values.mean(axis=0)
    means = centre + inflate * (means - centre)
    return float(np.mean(means[:, leader] >= means.max(axis=1) - margin - 1e-12))


def corpus_statistics(name: str, cache_dir: Path, draws: int) -> pd.DataFrame:
    """One row per (draw, k) of random texts: the leader's loss and the statistics the rules read."""
    candidates = [m for m in default_models() if get_spec(m).role == "candidate"]
    bench, embeddings = corpus_embeddings(name, candidates, cache_dir, BENCHMARK_MAX_LENGTH)
    labels = np.asarray(bench.frame["label"].astype(str).tolist())
    xs = probes.check_embeddings(embeddings)
    models = list(xs)
    oracle = oracle_scores(xs, labels=labels.tolist(), seed=0)["accuracy"]
    rows = []
    for draw in range(draws):
        order = np.random.default_rng([0, draw]).permutation(labels.shape[0])[: max(KS)]
        for k in KS:
            chosen = order[:k]
            codes = np.unique(labels[chosen], return_inverse=True)[1].reshape(-1)
            if np.unique(codes).size < 2:
                continue
            correct, margin = probes.curve_scores(xs, chosen, codes, "ridge", draw)
            leader = int(np.argmax(margin.mean(axis=0)))
            sample = np.random.default_rng(draw).integers(0, k, size=(probes.BOOTSTRAP_DRAWS, k))
            row = {
                "corpus": name,
                "draw": draw,
                "k": k,
                "n_classes": int(np.unique(codes).size),
                "n_repeated": int((np.bincount(codes) >= 2).sum()),
                "within": regret_points(oracle, models[leader], models) <= WITHIN_POINTS,
                "p_acc": _p_near(correct, sample, leader, 0.02),
                "ci_low": float(np.quantile(correct[sample].mean(axis=1)[:, leader], 0.025)),
            }
            for f in INFLATE:
                row[f"p_near_{f}"] = _p_near(margin, sample, leader, MARGIN_NEAR, f)
            rows.append(row)
    return pd.DataFrame(rows)


def rules() -> dict[tuple[str, object], Callable[[pd.DataFrame], pd.Series]]:
    """Every candidate as (family, parameter) -> function of the statistics frame -> settled (bool)."""

    def base(s, f=1.0, m=stopping.MIN_SETTLED_LABELS):
        return (s[f"p_near_{f}"] >= MARGIN_SETTLED_P) & (s["k"] >= m) & (s["n_repeated"] >= 2)

    def per_class(s, m):
        return s["k"] / s["n_classes"] >= m

    def above(s, d):
        return s["ci_low"] >= 1.0 / s["n_classes"] + d

    out = {}
    for f in INFLATE:
        out[("inflate", f)] = lambda s, f=f: base(s, f)
    for q in (0.5, 0.8, 0.9, 0.95):
        out[("agree", q)] = lambda s, q=q: base(s) & (s["p_acc"] >= q)
    for m in (16, 32, 48, 64, 128):
        out[("min-labels", m)] = lambda s, m=m: base(s, 1.0, m)
    for m in (4, 8, 12, 16, 24, 32):
        out[("per-class", m)] = lambda s, m=m: base(s) & per_class(s, m)
    for d in (0.0, 0.05, 0.1, 0.15, 0.2):
        out[("above-chance", d)] = lambda s, d=d: base(s) & above(s, d)
        for m in (8, 12, 16, 24):
            out[("above-chance+per-class", (d, m))] = lambda s, d=d, m=m: (
                base(s) & above(s, d) & per_class(s, m)
            )
    return out


def summary(stats: pd.DataFrame, settled: pd.Series) -> pd.DataFrame:
    """Per corpus: ``share`` settled, ``within`` (of the settled, NaN when none), ``n``, ``s64``, ``s128``."""
    frame = stats.assign(settled=settled.to_numpy())
    out = {}
    for corpus, group in frame.groupby("corpus"):
        done = group[group["settled"]]
        out[corpus] = {
            "share": group["settled"].mean(),
            "within": done["within"].mean() if len(done) else np.nan,
            "n": len(done),
            "s64": group.loc[group["k"] == 64, "settled"].mean(),
            "s128": group.loc[group["k"] == 128, "settled"].mean(),
        }
    return pd.DataFrame(out).T


def choose(results: dict, names: list, corpora: list[str]) -> object:
    """The parameter the leave-one-corpus-out criterion picks on ``corpora``."""
    useful = [n for n in names if results[n].loc[corpora, "s128"].mean() >= FLOOR_SHARE] or names
    calibrated = [n for n in useful if (results[n].loc[corpora, "within"].fillna(1.0) >= 0.9).all()]
    if calibrated:
        return max(calibrated, key=lambda n: results[n].loc[corpora, ["s64", "s128"]].mean().mean())
    return max(
        useful,
        key=lambda n: (
            results[n].loc[corpora, "within"].fillna(1.0).min(),
            results[n].loc[corpora, "s128"].mean(),
        ),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpora", default=None, help="comma-separated; default: every classification corpus"
    )
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.bench-emb-cache"))
    args = parser.parse_args(argv)
    names = args.corpora.split(",") if args.corpora else classification_corpora()
    stats = pd.concat(
        [corpus_statistics(name, args.cache_dir, args.draws) for name in names], ignore_index=True
    )
    corpora = sorted(stats["corpus"].unique())
    candidates = rules()
    results = {name: summary(stats, rule(stats)) for name, rule in candidates.items()}
    print("every candidate: per corpus, within 2 points among the settled draws (settled draws of all)")
    for name, table in results.items():
        cells = " ".join(
            f"{c}: {100 * table.loc[c, 'within']:.0f}% ({int(table.loc[c, 'n'])}/{int((stats['corpus'] == c).sum())})"
            for c in corpora
        )
        print(f"{name[0]} {name[1]}: {cells}")
    print("\nleave-one-corpus-out")
    for family in dict.fromkeys(name[0] for name in candidates):
        names_ = [n for n in candidates if n[0] == family]
        for held in corpora:
            pick = choose(results, names_, [c for c in corpora if c != held])
            t = results[pick].loc[held]
            print(
                f"{family}, {held} held out: {pick[1]} -> within {100 * t['within']:.0f}% of {int(t['n'])} "
                f"settled; settled at k=64 {100 * t['s64']:.0f}%, k=128 {100 * t['s128']:.0f}%"
            )
        print(f"{family}, on every corpus: {choose(results, names_, corpora)[1]}")


if __name__ == "__main__":
    main()
