"""How sure the labels must be before the few-label answer names another model
(``accuracy_posterior.SWITCH_CHANCE``), judged on the answer benchmark's kept classification corpora,
leave one corpus out.

For each classification corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior is
learned from the *other* corpora as in ``bench/studies/few_label_prior.py``. Seeded draws of random texts
are labelled with the corpus's own labels in batches of 16 (up to 128); after each batch the posterior is
updated, and for each threshold θ the answer keeps the model it named before (before any label: the
prior's pick) unless the labels favour the leader over it with chance at least θ
(``accuracy_posterior.named_model``; θ = 0.5 names the highest estimate). Each named model is judged by
the oracle (5-fold logistic regression on all texts).

Prints, per θ and k: mean points lost and the share within 2 points; how often the named model changes
between consecutive batches after 32 labels (overall and per corpus); the share of draws settled at 128
labels (the named model's chance of being within 2 points at least 0.9) and the share of those within 2
points; mean points lost per corpus; and θ chosen leave one corpus out, by the fewest mean points lost
over k on the other corpora, with what it lost. ``--json`` writes every figure.

    .venv/bin/python bench/studies/switch_chance.py --root .cache/answer-benchmark --draws 10
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.studies.draws.choice_draws import corpus_prior  # noqa: E402
from flare_core.benchmark.answer_stage import judged_record, oracle_series  # noqa: E402
from flare_core.benchmark.embedding_store import kept_corpora, load_kept  # noqa: E402
from flare_core.benchmark.posterior_draws import KS, SURE, TOLERANCE, lost  # noqa: E402
from flare_core.choosing import accuracy_posterior as ap  # noqa: E402
from flare_core.choosing.probes import probe_scores  # noqa: E402

THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)


def judge(root: Path, name: str, records: dict, draws: int, seed: int) -> list[dict]:
    """One row per draw, k and threshold on corpus ``name``, the prior learned from the other records."""
    record = records[name]
    models = record["candidates"]
    prior, _, _ = corpus_prior(name, records)
    kept = load_kept(str(root), name, models)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in models}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    oracle = oracle_series(record)
    start = int(np.argmax(ap.posterior(prior, None)[0]))
    rows = [{"corpus": name, "draw": -1, "k": 0, "theta": th, "pick": models[start],
             "lost": lost(oracle, models[start], models)} for th in THRESHOLDS]  # fmt: skip
    for draw in range(draws):
        order = np.random.default_rng([seed, draw]).permutation(labels.shape[0])
        named = dict.fromkeys(THRESHOLDS, start)
        for k in KS:
            values, codes = np.unique(labels[order[:k]], return_inverse=True)
            if values.size < 2:
                continue
            correct, _ = probe_scores(xs, order[:k], codes.reshape(-1), "ridge", seed=draw)
            mean, cov = ap.posterior(prior, correct)
            _, within = ap.chances(ap.draws_of(mean, cov, draw), TOLERANCE)
            for th in THRESHOLDS:
                named[th] = ap.named_model(mean, cov, named[th], threshold=th)
                pick = models[named[th]]
                rows.append({"corpus": name, "draw": draw, "k": k, "theta": th, "pick": pick,
                             "lost": lost(oracle, pick, models), "p_within": float(within[named[th]])})  # fmt: skip
    return rows


def changes(frame: pd.DataFrame) -> pd.DataFrame:
    """Share of consecutive batches (k ≥ 32) whose named model differs, per corpus and threshold."""
    late = frame[frame["k"] >= 32].sort_values("k")
    per_draw = late.groupby(["theta", "corpus", "draw"])["pick"].apply(
        lambda s: float((s.to_numpy()[1:] != s.to_numpy()[:-1]).mean()) if len(s) > 1 else np.nan
    )
    return per_draw.groupby(["corpus", "theta"]).mean().unstack()


def nested(frame: pd.DataFrame) -> tuple[dict[str, float], pd.Series]:
    """θ chosen for each corpus by the fewest mean points lost on the others, and what it lost by k."""
    judged = frame[frame["k"] > 0]
    mean = judged.groupby(["corpus", "theta"])["lost"].mean().unstack()
    chosen = {c: float(mean.drop(index=c).mean().idxmin()) for c in mean.index}
    parts = [judged[(judged["corpus"] == c) & (judged["theta"] == th)] for c, th in chosen.items()]
    return chosen, pd.concat(parts).groupby("k")["lost"].mean()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = Path(args.root)
    names = kept_corpora(root, "classification")
    records = {n: judged_record(root, n, seed=args.seed) for n in names}
    rows = []
    for name in names:
        start = time.perf_counter()
        rows += judge(root, name, records, args.draws, args.seed)
        print(f"{name}: {time.perf_counter() - start:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    judged = frame[frame["k"] > 0].assign(within=lambda f: f["lost"] <= TOLERANCE)
    by_k = judged.pivot_table(index="k", columns="theta", values="lost")
    within = judged.pivot_table(index="k", columns="theta", values="within")
    per_corpus_changes = changes(frame)
    at_128 = judged[judged["k"] == 128].assign(settled=lambda f: f["p_within"] >= SURE)
    settled = at_128.groupby("theta")["settled"].mean()
    right = judged[judged["p_within"] >= SURE].groupby("theta")["within"].mean()
    chosen, nested_by_k = nested(frame)
    print(
        f"label-free pick: {frame[frame['k'] == 0].groupby('theta')['lost'].mean().iloc[0]:.2f} points lost"
    )
    print("mean points lost by k", by_k.round(2).to_string(), sep="\n")
    print("mean over k", judged.groupby("theta")["lost"].mean().round(3).to_dict())
    print(f"share within {TOLERANCE:g} points by k", within.round(2).to_string(), sep="\n")
    print("changes of model after 32 labels", per_corpus_changes.mean().round(3).to_dict())
    print("settled at 128", settled.round(3).to_dict(), "of those within", right.round(3).to_dict())
    print(judged.pivot_table(index="corpus", columns="theta", values="lost").round(2).to_string())
    print("θ chosen leave one corpus out:", pd.Series(chosen).value_counts().to_dict())
    print("its points lost by k", nested_by_k.round(2).to_dict())
    if args.json:
        args.json.write_text(json.dumps({
            "by_k": by_k.reset_index().to_dict(orient="records"),
            "within": within.reset_index().to_dict(orient="records"),
            "changes": per_corpus_changes.reset_index().to_dict(orient="records"),
            "settled_at_128": settled.to_dict(), "settled_within": right.to_dict(),
            "chosen": chosen, "nested_by_k": nested_by_k.to_dict(),
        }, indent=1, default=float))  # fmt: skip


if __name__ == "__main__":
    main()
