"""How sure the forecast "about n more labels would settle it" should be before it names an n, judged on the
answer benchmark's kept classification corpora, leave one corpus out.

For each corpus kept under ``--root`` (``flare benchmark --stage answer``), the prior and the reading of
the labels are learned on the other corpora, as the product's are (``flare_core/benchmark/posterior_draws.py``,
``reading_draws.py``). Seeded draws of random texts are labelled in batches of 16, up to ``--most``
labels, each batch keeping the model named before it unless its labels displace it, and after each batch
the answer is settled or not (the named model within 2 points of the best with 90% chance). At 16, 32 and
64 labels, when not settled, the posterior's share of foreseen futures settled after n more labels
(:func:`~flare_core.choosing.label_forecast.settled_shares`, n = 16, 32, … 256) gives the forecast
at every threshold at once: the fewest n whose share reaches it. The forecast came true when the same
draw was settled n labels later.

Prints, per threshold: the share of unsettled answers that name an n, how many of those could be checked
(the corpus has the labels), and the share that came true; then the threshold chosen on the other corpora
for each corpus (the lowest whose forecasts came true in at least ``--true`` of the checked ones) and what
it did on the left-out corpus.

    .venv/bin/python bench/studies/forecast_chance.py --root .cache/answer-benchmark --draws 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.benchmark.answer_stage import chance_level, judged_record  # noqa: E402
from flare_core.benchmark.embedding_store import kept_corpora, load_kept  # noqa: E402
from flare_core.benchmark.posterior_draws import SURE, TOLERANCE, _frame, left_out  # noqa: E402
from flare_core.benchmark.reading_draws import all_rows, left_out_reading  # noqa: E402
from flare_core.choosing.accuracy_posterior import prior_by_rank  # noqa: E402
from flare_core.choosing.label_forecast import settled_shares  # noqa: E402
from flare_core.choosing.probes import probe_scores  # noqa: E402

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
ASKED_AT, STEP, MOST = (16, 32, 64), 16, 256


def corpus_rows(root: str, name: str, records: dict, reading, draws: int, most_labels: int) -> list[dict]:
    """One row per draw and k in :data:`ASKED_AT` that is not settled: the shares of settled futures and
    whether the draw was settled at each later k (from its own chain of batches)."""
    record = records[name]
    cases, rule, ranked = left_out(name, records)
    candidates = record["candidates"]
    prior = prior_by_rank(cases, rule, ranked).reordered(candidates).read_with(reading)
    kept = load_kept(root, name, candidates)
    xs = {m: np.asarray(kept.embeddings[m], dtype=np.float64) for m in candidates}
    labels = kept.bench.frame["label"].astype(str).to_numpy()
    classes, chance = int(np.unique(labels).size), chance_level(record)
    provisional = str(_frame(prior, None, chance, 0)["model"].iloc[0])
    rows = []
    for draw in range(draws):
        order = np.random.default_rng([0, draw]).permutation(labels.shape[0])
        named, settled, asked = provisional, {}, {}
        for k in range(STEP, min(most_labels, labels.shape[0]) + 1, STEP):
            picked = order[:k]
            values, codes = np.unique(labels[picked], return_inverse=True)
            if values.size < 2:
                continue
            scores = probe_scores(xs, picked, codes.reshape(-1), "ridge", seed=draw)[0]
            frame = _frame(prior, scores, chance, draw, named, classes)
            named = str(frame["model"].iloc[0])
            settled[k] = bool(frame["p_within"].iloc[0] >= SURE)
            if k in ASKED_AT and not settled[k]:
                steps, shares = settled_shares(prior, scores, tolerance_points=TOLERANCE, sure=SURE, step=STEP,
                                               most=MOST, seed=draw, classes=classes)  # fmt: skip
                asked[k] = dict(zip(steps.tolist(), shares.tolist(), strict=True))
        for k, shares in asked.items():
            rows.append({"corpus": name, "draw": draw, "k": k, "shares": shares,
                         "later": {j - k: s for j, s in settled.items() if j > k}})  # fmt: skip
    return rows


def by_threshold(rows: list[dict], thresholds=THRESHOLDS) -> pd.DataFrame:
    """Per threshold: ``named`` (share of the unsettled answers naming an n), ``checked`` (named and
    checkable), ``came_true`` (share of the checked settled n labels later)."""
    out = []
    for c in thresholds:
        named = checked = true = 0
        for row in rows:
            more = next((n for n, s in sorted(row["shares"].items()) if s >= c), None)
            if more is None:
                continue
            named += 1
            if more in row["later"]:
                checked += 1
                true += int(row["later"][more])
        out.append({"threshold": c, "unsettled": len(rows), "named": named / max(len(rows), 1),
                    "checked": checked, "came_true": true / checked if checked else float("nan")})  # fmt: skip
    return pd.DataFrame(out)


def nested(rows: list[dict], least_true: float) -> pd.DataFrame:
    """For each corpus, the lowest threshold whose forecasts came true in at least ``least_true`` of the
    checked ones on the other corpora, and what it did on this one."""
    out = []
    for corpus in sorted({r["corpus"] for r in rows}):
        others = by_threshold([r for r in rows if r["corpus"] != corpus])
        good = others[others["came_true"] >= least_true]
        chosen = float(good["threshold"].min()) if len(good) else max(THRESHOLDS)
        mine = by_threshold([r for r in rows if r["corpus"] == corpus], (chosen,)).iloc[0]
        out.append({"corpus": corpus, "chosen": chosen, **mine.drop("threshold").to_dict()})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=".cache/answer-benchmark", help="the kept embeddings")
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--most", type=int, default=320, help="label up to this many texts per draw")
    parser.add_argument("--true", type=float, default=0.6, help="the share of forecasts that must come true")
    parser.add_argument("--json", type=Path, default=None, help="write every row here")
    args = parser.parse_args()
    start = time.perf_counter()
    names = [
        n
        for n in kept_corpora(args.root, "classification")
        if (Path(args.root) / n / "record.json").is_file()
    ]
    records = {n: judged_record(args.root, n) for n in names}
    records = {n: r for n, r in records.items() if r.get("oracle") == "accuracy"}
    learned = all_rows(args.root, records)
    print(f"reading drawn in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for name in records:
            rows += corpus_rows(
                args.root, name, records, left_out_reading(learned, name), args.draws, args.most
            )
            print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    pd.set_option("display.width", 200)
    print(by_threshold(rows).round(3).to_string(index=False))
    print()
    table = nested(rows, args.true)
    print(table.round(3).to_string(index=False))
    named = (table["named"] * table["unsettled"]).sum() / table["unsettled"].sum()
    true = (table["came_true"] * table["checked"]).sum() / max(table["checked"].sum(), 1)
    print(
        f"chosen on the others: named {named:.0%} of unsettled answers, came true {true:.0%} of the checked"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
