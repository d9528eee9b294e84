"""The trust assessment: planted cases for every check and the level rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.answer.trust import RANDOM_WEIGHTS, ROWS_SHUFFLED, Evidence, assess


def _scores(values: dict[str, float], half_width: float = 0.001) -> pd.DataFrame:
    frame = pd.DataFrame({"model": list(values), "score": list(values.values())})
    return frame.assign(ci_low=frame["score"] - half_width, ci_high=frame["score"] + half_width)


GOOD = _scores({f"m{i}": 0.30 - 0.03 * i for i in range(8)})  # 8 candidates, well separated
CONTROLS = {"random-minilm-l6": (RANDOM_WEIGHTS, 0.01), "shuffled-glove-6b-50d": (ROWS_SHUFFLED, 0.0)}


def _evidence(**changes) -> Evidence:
    base = dict(
        scores=GOOD, controls=CONTROLS, stability=0.95, agreement=0.8, n_train=1800, n_val=200,
        dims=32, raw_dim=768, median_gap=0.5, median_is=2.0,
    )  # fmt: skip
    base.update(changes)
    return Evidence(**base)


def _status(assessment, name: str) -> str:
    return next(c.status for c in assessment.checks if c.name == name)


def test_every_check_passing_gives_high():
    result = assess(_evidence())
    assert result.level == "high"
    assert [c.status for c in result.checks] == ["pass"] * 7
    assert all(c.text.endswith(".") and c.figure for c in result.checks)


def test_a_control_that_outranks_a_trained_model_makes_trust_low():
    controls = {**CONTROLS, "random-minilm-l6": (RANDOM_WEIGHTS, 0.15)}  # above m5, m6, m7
    result = assess(_evidence(controls=controls))
    assert result.level == "low"
    check = next(c for c in result.checks if c.name == "controls")
    assert check.status == "fail" and check.value == 3.0
    assert "random-minilm-l6" in check.text and "m7" in check.text and "m4" not in check.text


def test_estimators_that_disagree_never_read_as_moderate():
    for agreement in (-0.14, -0.9, 0.1):
        result = assess(_evidence(agreement=agreement))
        assert _status(result, "agreement") == "fail" and result.level == "low"
    assert "opposite" in next(
        c.text for c in assess(_evidence(agreement=-0.5)).checks if c.name == "agreement"
    )
    assert _status(assess(_evidence(agreement=0.45)), "agreement") == "warn"
    assert assess(_evidence(agreement=None)).level == "moderate"
    # a stable ranking beside estimators that disagree: the check says what each compares
    text = next(c.text for c in assess(_evidence(agreement=0.2)).checks if c.name == "agreement")
    assert "hardly agree on the order of the models (agreement 0.20; 1 = same order)" in text
    assert "the ranking can be stable and still depend on the estimator" in text


def test_too_few_texts_for_the_dimensions_fails():
    # 150 texts, 768-dimensional models: 135 to fit, 15 held out
    result = assess(_evidence(n_train=135, n_val=15, dims=32, raw_dim=768))
    assert _status(result, "sample size") == "fail" and result.level == "low"
    text = next(c.text for c in result.checks if c.name == "sample size")
    assert "150 texts" in text and "fewer texts (150) than dimensions (768)" in text


def test_a_generalisation_gap_that_dwarfs_the_is_values_is_flagged():
    result = assess(_evidence(median_gap=30.9, median_is=2.0))
    assert _status(result, "sample size") == "warn" and result.level == "moderate"
    text = next(c.text for c in result.checks if c.name == "sample size")
    assert "gap 31 nats against IS values of 2" in text


@pytest.mark.parametrize(("n", "status"), [(4, "fail"), (5, "warn"), (7, "warn"), (8, "pass"), (12, "pass")])
def test_pool_size(n, status):
    scores = _scores({f"m{i}": 0.5 - 0.04 * i for i in range(n)})
    assert _status(assess(_evidence(scores=scores)), "pool") == status


def test_shuffled_pairs_must_score_near_zero():
    assert _status(assess(_evidence()), "shuffled") == "pass"
    high = {**CONTROLS, "shuffled-glove-6b-50d": (ROWS_SHUFFLED, 0.12)}  # 40% of the leader's 0.30
    assert _status(assess(_evidence(controls=high)), "shuffled") == "fail"


def test_missing_evidence_is_not_checked_and_caps_the_level_at_moderate():
    result = assess(_evidence(controls={}, stability=None))
    statuses = {c.name: c.status for c in result.checks}
    assert statuses["controls"] == statuses["shuffled"] == statuses["stability"] == "not checked"
    assert result.level == "moderate"


def test_tied_leader_is_a_warning():
    scores = _scores({f"m{i}": 0.30 - 0.03 * i for i in range(8)}, half_width=0.02)
    result = assess(_evidence(scores=scores))
    check = next(c for c in result.checks if c.name == "separation")
    assert check.status == "warn" and "m1" in check.text and result.level == "moderate"


def test_unstable_ranking_fails():
    assert _status(assess(_evidence(stability=0.6)), "stability") == "fail"
    assert _status(assess(_evidence(stability=0.8)), "stability") == "warn"
    assert _status(assess(_evidence(stability=float("nan"))), "stability") == "not checked"


def test_bad_input():
    with pytest.raises(ValueError, match="Evidence"):
        assess({"scores": GOOD})  # type: ignore[arg-type]
    assert np.isfinite(assess(_evidence()).to_dict()["checks"][0]["value"])
