"""The benchmark's clustering table: each label-free score's ρ with the candidates' V-measure."""

from __future__ import annotations

from typing import Any

from scipy.stats import spearmanr

from flare_core.benchmark import report as benchmark_report
from flare_core.benchmark.suite import TABLE_SCORES

CANDIDATES = ["a", "b", "c", "d", "e"]
#: Per corpus: each candidate's accuracy, kNN accuracy and V-measure (three oracles that order them
#: differently), each label-free score, and the ranking's leader.
CORPORA: dict[str, dict[str, Any]] = {
    "topics": {
        "oracle": [0.9, 0.8, 0.7, 0.6, 0.5],
        "oracle_knn": [0.5, 0.6, 0.7, 0.8, 0.9],
        "oracle_vmeasure": [0.30, 0.10, 0.50, 0.20, 0.40],
        "flow": [5.0, 4.0, 3.0, 2.0, 1.0],
        "gmm": [1.0, 3.0, 2.0, 5.0, 4.0],
        "dim": [384, 768, 384, 50, 256],
        "effective_rank": [10.0, 30.0, 20.0, 5.0, 40.0],
        "uniformity": [-1.0, -2.0, -4.0, -3.0, -5.0],
        "leading": "a",
    },
    "sentiment": {
        "oracle": [0.6, 0.7, 0.8, 0.9, 0.95],
        "oracle_knn": [0.9, 0.7, 0.8, 0.6, 0.5],
        "oracle_vmeasure": [0.02, 0.09, 0.01, 0.05, 0.07],
        "flow": [2.0, 5.0, 1.0, 4.0, 3.0],
        "gmm": [4.0, 1.0, 5.0, 2.0, 3.0],
        "dim": [64, 768, 50, 384, 512],
        "effective_rank": [12.0, 8.0, 30.0, 22.0, 15.0],
        "uniformity": [-3.0, -1.0, -2.0, -5.0, -4.0],
        "leading": "c",
    },
}


def _record(name: str, values: dict[str, Any]) -> dict[str, Any]:
    rows = [
        {"model": m, "role": "candidate", **{k: v[i] for k, v in values.items() if k != "leading"}}
        for i, m in enumerate(CANDIDATES)
    ]
    # a control far above every candidate on V-measure and on each score: ρ is over the candidates only
    rows.append({"model": "random", "role": "control", "oracle": 0.99, "oracle_knn": 0.99,
                 "oracle_vmeasure": 0.99, "flow": 99.0, "gmm": 99.0, "dim": 9999, "effective_rank": 999.0,
                 "uniformity": 9.0})  # fmt: skip
    return {"corpus": name, "oracle": "accuracy", "candidates": CANDIDATES, "controls": ["random"],
            "table": rows, "verdict": {"leading": values["leading"]}}  # fmt: skip


def _similarity_record() -> dict[str, Any]:
    rows = [
        {"model": m, "role": "candidate", "oracle": 0.1 * i, "flow": float(i)}
        for i, m in enumerate(CANDIDATES)
    ]
    return {"corpus": "pairs", "oracle": "sts_spearman", "candidates": CANDIDATES, "controls": [],
            "table": rows, "verdict": {"leading": "a"}}  # fmt: skip


def _cells(lines: list[str]) -> dict[str, list[str]]:
    return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in lines[3:]}


def test_the_vmeasure_table_gives_each_scores_spearman_with_the_candidates_vmeasure():
    result = {"corpora": [_record(n, v) for n, v in CORPORA.items()] + [_similarity_record()]}
    lines = benchmark_report.vmeasure_lines(result)
    assert lines[1].startswith("| corpus (V-measure oracle) | best model (V-measure) | points lost | ρ flow")
    cells = _cells(lines)
    assert list(cells) == [  # a corpus without V-measure has no row
        "topics",
        "sentiment",
        "**mean**",
        "FLARE paper (clustering)",
    ]
    expected_means = {s: [] for s in TABLE_SCORES}
    swapped_differs = False
    for name, values in CORPORA.items():
        vmeasure = values["oracle_vmeasure"]
        best = CANDIDATES[max(range(5), key=vmeasure.__getitem__)]
        lost = 100 * (max(vmeasure) - vmeasure[CANDIDATES.index(values["leading"])])
        for i, score in enumerate(TABLE_SCORES):
            rho = float(spearmanr(values[score], vmeasure).statistic)
            expected_means[score].append(rho)
            assert cells[name][2 + i] == f"{rho:.2f}", (name, score)
            for other in ("oracle", "oracle_knn"):
                swapped_differs |= (
                    f"{float(spearmanr(values[score], values[other]).statistic):.2f}" != f"{rho:.2f}"
                )
        assert cells[name][:2] == [best, f"{lost:.1f}"]
    assert swapped_differs  # the hand-made oracles tell V-measure from accuracy and kNN accuracy
    assert cells["**mean**"][2:] == [f"{sum(v) / len(v):.2f}" for v in expected_means.values()]
    assert cells["FLARE paper (clustering)"][2] == "0.83 (its IS score)"


def test_a_benchmark_without_vmeasure_has_no_clustering_table():
    assert benchmark_report.vmeasure_lines({"corpora": [_similarity_record()]}) == []
