"""The few-judgement study for search on a tiny kept corpus: 30 documents, 6 queries, 3 models that each
rank the documents in an order of their own, so every pool, per-query nDCG@10, pick and table figure can
be worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from bench.studies.draws import search_draws as sd

N_DOCS = 30
#: Each model's ranking of the documents for every query (every query is the same direction).
ORDERS = {
    "a": list(range(30)),  # top 10: 0-9
    "b": list(range(19, 9, -1)) + list(range(10)) + list(range(20, 30)),  # top 10: 19, 18, … 10
    "c": [2, 15, 0, 11, 3, 4, 5, 6, 7, 8] + [1, 9, 10, 12, 13, 14, 16, 17, 18, 19] + list(range(20, 30)),
}
#: Relevant documents of each query; 25 is in no model's top 10, so no pool holds it.
RELEVANT = {"q0": [0], "q1": [15], "q2": [25], "q3": [1, 25], "q4": [2], "q5": [11, 19]}


def _arc(order: list[int]) -> np.ndarray:
    """Documents on an arc: the document at ``order[j]`` is the j-th nearest to the query (1, 0)."""
    out = np.zeros((N_DOCS, 2), dtype=np.float32)
    for j, row in enumerate(order):
        out[row] = [math.cos(0.05 * j), math.sin(0.05 * j)]
    return out


def _dcg(ranks: list[int]) -> float:
    return sum(1.0 / math.log2(r + 1) for r in ranks)


def _by_hand() -> pd.DataFrame:
    """Per-query nDCG@10 on the pooled judgements (the relevant documents in the pool), by hand (Q, M)."""
    out = {}
    for model, order in ORDERS.items():
        row = {}
        for query, relevant in RELEVANT.items():
            pooled = [d for d in relevant if d != 25]
            if not pooled:
                continue
            found = [order.index(d) + 1 for d in pooled if order.index(d) < 10]
            row[query] = _dcg(found) / _dcg(list(range(1, len(pooled) + 1)))
        out[model] = row
    return pd.DataFrame(out)


def _keep(root, name: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    meta = {"name": name, "task": "query → documents", "description": "tiny", "source": "hand-made",
            "licence": "CC0", "oracle": "retrieval", "seed": 0, "n_texts": N_DOCS, "cleaning": {}}  # fmt: skip
    (folder / "corpus.json").write_text(json.dumps(meta))
    pd.DataFrame({"text": [f"document {i}" for i in range(N_DOCS)]}).to_csv(folder / "frame.csv", index=False)
    judged = [(q, f"query {q}", d, 1) for q, docs in RELEVANT.items() for d in docs]
    pd.DataFrame(judged, columns=["query_id", "query_text", "doc_row", "relevance"]).to_csv(
        folder / "judgements.csv", index=False
    )
    for model, order in ORDERS.items():
        np.save(folder / f"{model}.npy", _arc(order))
        np.save(folder / f"{model}.queries.npy", np.tile(np.float32([1.0, 0.0]), (len(RELEVANT), 1)))
        (folder / f"{model}.json").write_text(json.dumps({"model": model, "seconds": 1.0, "dim": 2}))


def _record(name: str, oracle: dict[str, float], dim: dict[str, float]) -> dict:
    table = [{"model": m, "oracle": oracle[m], "ndcg_at_10": oracle[m], "dim": dim[m],
              "effective_rank": dim[m], "uniformity": dim[m]} for m in ORDERS]  # fmt: skip
    return {"corpus": name, "oracle": "ndcg_at_10", "candidates": list(ORDERS), "table": table}


@pytest.fixture
def kept(tmp_path):
    """The tiny corpus kept as ``tiny``, and records of it and two others the prior learns from: on
    those, the widest model is the best by 10 points and the narrowest the worst."""
    _keep(tmp_path, "tiny")
    oracle = {"a": 0.40, "b": 0.30, "c": 0.395}
    records = {
        "tiny": _record(
            "tiny", oracle, {"a": 10.0, "b": 30.0, "c": 20.0}
        ),  # the rule picks b: 10 points lost
        "other-1": _record("other-1", {"a": 0.6, "b": 0.5, "c": 0.4}, {"a": 30.0, "b": 20.0, "c": 10.0}),
        "other-2": _record("other-2", {"a": 0.3, "b": 0.5, "c": 0.4}, {"a": 10.0, "b": 30.0, "c": 20.0}),
    }
    return tmp_path, records, oracle


def test_pools_and_per_query_ndcg_by_hand(kept):
    root, records, oracle = kept
    pooled = sd.pooled_corpus(root, "tiny", records["tiny"])
    hand = _by_hand()
    # q2's only relevant document is in no pool: judged, not counted; q3 counts its pooled one alone
    assert list(pooled.ndcg.index) == ["q0", "q1", "q3", "q4", "q5"] and pooled.queries == tuple(RELEVANT)
    assert pooled.ndcg.loc[hand.index, list(ORDERS)].to_numpy() == pytest.approx(hand.to_numpy(), abs=1e-9)
    assert pooled.ndcg.loc["q0"].tolist() == pytest.approx([1.0, 0.0, 1 / math.log2(4)])
    assert pooled.ndcg.loc["q3", "a"] == pytest.approx(1 / math.log2(3))  # without 25: ideal is one document
    assert pooled.oracle.to_dict() == pytest.approx(oracle)


def test_label_free_pick_and_draws_by_hand(kept):
    root, records, oracle = kept
    variants = {**sd.PRODUCT, "benchmark prior": ("benchmark", 1.5)}
    rows = pd.DataFrame(sd.judge_corpus(root, "tiny", records, draws=3, ks=(2, 4), variants=variants))
    # the rule chosen on the other two corpora: the width is right on one of them and wrong on the other,
    # whatever it is, the label-free pick is its top on this corpus
    rule = rows["rule"].iloc[0]
    zero = rows[rows["k"] == 0].set_index("method")
    top = max(ORDERS, key=lambda m: records["tiny"]["table"][list(ORDERS).index(m)][rule])
    assert zero.loc["label-free", "pick"] == top
    assert zero.loc["label-free", "lost"] == pytest.approx(100 * (0.40 - oracle[top]))
    # with no judgement the benchmark prior names the label-free pick
    assert zero.loc["benchmark prior", "pick"] == zero.loc["label-free", "pick"]
    hand = _by_hand()
    for draw in range(3):
        order = [list(RELEVANT)[i] for i in np.random.default_rng([0, draw]).permutation(len(RELEVANT))]
        named = None
        for k in (2, 4):
            chosen = [q for q in order[:k] if q != "q2"]
            today = rows[(rows["draw"] == draw) & (rows["k"] == k) & (rows["method"] == sd.TODAY)].iloc[0]
            assert today["n_counted"] == len(chosen)
            assert not today["settled"]  # fewer judged queries than the advice's floor
            if not chosen:
                continue
            # every model alike before: the highest mean nDCG@10 on the counted queries leads, and the one
            # named at the k before stays only while it is not behind
            means = hand.loc[chosen].mean()
            leaders = [m for m in ORDERS if means[m] >= means.max() - 1e-12]
            assert today["pick"] in leaders + ([named] if named else [])
            assert today["lost"] == pytest.approx(100 * (0.40 - oracle[today["pick"]]))
            assert 0 < today["covered"] <= 1
            named = today["pick"]


def test_tables_from_rows_by_hand():
    rows = pd.DataFrame(
        [
            {"corpus": "x", "draw": -1, "k": 0, "method": "label-free", "pick": "a", "lost": 3.0},
            {"corpus": "x", "draw": 0, "k": 5, "method": "posterior", "pick": "a", "lost": 3.0,
             "settled": False, "stated": [[0.5, 3.0], [0.5, 0.0]]},
            {"corpus": "x", "draw": 0, "k": 10, "method": "posterior", "pick": "b", "lost": 0.0,
             "settled": True, "stated": [[0.95, 0.0], [0.05, 3.0]]},
            {"corpus": "x", "draw": 1, "k": 5, "method": "posterior", "pick": "b", "lost": 0.0,
             "settled": False, "stated": [[0.6, 0.0], [0.4, 3.0]]},
            {"corpus": "x", "draw": 1, "k": 10, "method": "posterior", "pick": "b", "lost": 1.5,
             "settled": True, "stated": [[0.92, 1.5], [0.08, 4.0]]},
            {"corpus": "x", "draw": 0, "k": 5, "method": "product", "pick": "a", "lost": 1.5,
             "settled": False, "stated": [[0.8, 2.5], [0.2, 0.0]]},
        ]
    )  # fmt: skip
    table = sd.method_table(rows).set_index(["method", "k"])
    assert table.loc[("posterior", 5), "mean_lost"] == pytest.approx(1.5)
    assert table.loc[("posterior", 5), "within"] == pytest.approx(0.5)
    assert table.loc[("posterior", 10), "settled"] == pytest.approx(1.0)
    assert table.loc[("posterior", 10), "settled_within"] == pytest.approx(1.0)
    assert table.loc[("posterior", 10), "changes"] == pytest.approx(0.5)  # draw 0 changed, draw 1 did not
    # k = 5: stated 0.5, 0.5, 0.6 and 0.4, true for the second and third; bin (0.3, 0.5] holds 0.5, 0.5
    # and 0.4 (one true of three), bin (0.5, 0.7] holds 0.6 (true)
    by_hand = (3 * abs((0.5 + 0.5 + 0.4) / 3 - 1 / 3) + 1 * abs(0.6 - 1.0)) / 4
    assert table.loc[("posterior", 5), "calibration"] == pytest.approx(by_hand)
    assert table.loc[("label-free", 0), "mean_lost"] == pytest.approx(3.0)
    # stated 0.8 for a model 2.5 points behind (false) and 0.2 for the best (true): bins (0.7, 0.9] and
    # (0.1, 0.3], each off by 0.8
    assert table.loc[("product", 5), "calibration"] == pytest.approx((0.8 + 0.8) / 2)
    out = sd.summary(rows)
    assert out["overall"]["posterior"]["n_settled"] == 2
    assert out["worst_corpus"]["posterior"]["corpus"] == "x"
