"""Scores of a smaller pool recomputed from one run's stored IS results, checked against the per-pair table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from flare_core.analyses.sufficiency import SufficiencyResult
from flare_core.benchmark.pools import pool_judgements, pool_size_lines, subpool_judgement, subpool_scores


@pytest.fixture(scope="module")
def gmm_result(labelled_run) -> SufficiencyResult:
    return SufficiencyResult.load(labelled_run.artefact("sufficiency", "gmm", "result"))


def test_subpool_scores_are_the_median_over_the_subpools_targets(labelled_run, gmm_result):
    keep = ["all-MiniLM-L6-v2", "glove-6b-50d", "tfidf-svd-256", "random-minilm-l6"]
    got = subpool_scores(gmm_result, keep)
    pairs = gmm_result.records
    for source in got.index:
        targets = [t for t in keep if t != source and t in gmm_result.names]
        want = pairs[(pairs["source"] == source) & pairs["target"].isin(targets)]["is_per_dim"].median()
        assert got[source] == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert "tokenlearn-static-64d" not in got.index
    # the whole pool gives back the run's own scores
    stored = labelled_run.load_frame("sufficiency", "gmm", "scores.parquet").set_index("model")["score"]
    whole = subpool_scores(gmm_result, list(gmm_result.sources))
    pd.testing.assert_series_equal(whole.loc[stored.index], stored, check_names=False)


def test_subpool_judgement_by_hand(labelled_run, gmm_result):
    candidates = ["all-MiniLM-L6-v2", "glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]
    oracle = {
        "all-MiniLM-L6-v2": 0.9,
        "glove-6b-50d": 0.7,
        "tokenlearn-static-64d": 0.8,
        "tfidf-svd-256": 0.6,
    }
    table = pd.DataFrame(
        {"oracle": oracle, "role": "candidate", "dim": {"all-MiniLM-L6-v2": 384, "glove-6b-50d": 50,
         "tokenlearn-static-64d": 64, "tfidf-svd-256": 49}, "gmm": np.nan}
    )  # fmt: skip
    pool = ["all-MiniLM-L6-v2", "glove-6b-50d", "tfidf-svd-256"]
    found = subpool_judgement(labelled_run, table, candidates, ["random-minilm-l6"], pool)
    assert found["candidates"] == pool and found["models"] == pool
    scores = subpool_scores(gmm_result, [*pool, "random-minilm-l6"]).loc[pool]
    rho = {r["score"]: r["spearman"] for r in found["agreement"]}
    assert rho["gmm"] == pytest.approx(spearmanr(scores, [oracle[m] for m in pool]).statistic)
    assert rho["dim"] == pytest.approx(1.0)  # 384 > 50 > 49 as 0.9 > 0.7 > 0.6
    top = scores.idxmax()
    assert found["regret"]["top_gmm"] == pytest.approx(100 * (0.9 - oracle[top]))
    assert found["regret"]["top_dim"] == 0.0
    assert pool_judgements(labelled_run, table, candidates, []) is None  # not the first pool and more


def test_pool_size_lines_show_both_pools_and_their_means():
    def judgement(rho: float, lost: float) -> dict:
        return {"candidates": ["x"] * 8, "agreement": [{"score": "flow", "spearman": rho}],
                "regret": {"top_flow": lost}}  # fmt: skip

    records = [
        {"corpus": "a", "pools": {"first": judgement(0.5, 4.0), "whole": judgement(0.7, 2.0)}},
        {"corpus": "b", "pools": {"first": judgement(0.3, 6.0), "whole": judgement(0.5, 1.0)}},
    ]
    lines = pool_size_lines({"corpora": records})
    assert lines[1].startswith("| corpus (8 → 8 candidates) | ρ flow |")
    assert "| a | 0.50 → 0.70 |" in lines[3] and "4.0 → 2.0" in lines[3]
    assert lines[-1].startswith("| **mean** | 0.40 → 0.60 |") and "5.0 → 1.5" in lines[-1]
    assert pool_size_lines({"corpora": [{"corpus": "c", "pools": None}]}) == []
