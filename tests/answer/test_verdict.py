"""The verdict: what it recommends (or refuses to), in words, for each trust level."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.answer.trust import RANDOM_WEIGHTS, ROWS_SHUFFLED, Evidence, assess
from flare_core.answer.verdict import overlapping, verdict


def _scores(rows):
    return pd.DataFrame(rows, columns=["model", "score", "ci_low", "ci_high"])


EIGHT = _scores(
    [(f"m{i}", 0.30 - 0.03 * i, 0.30 - 0.03 * i - 0.001, 0.30 - 0.03 * i + 0.001) for i in range(8)]
)
CONTROLS = pd.DataFrame(
    {"model": ["random", "shuffled"], "kind": [RANDOM_WEIGHTS, ROWS_SHUFFLED], "score": [0.01, 0.0],
     "would_rank": [9, 9]}
)  # fmt: skip


def _trust(scores=EIGHT, controls=CONTROLS, **changes):
    values = dict(
        scores=scores, controls={r.model: (r.kind, r.score) for r in controls.itertuples()}, stability=0.95,
        agreement=0.8, n_train=1800, n_val=200, dims=32, raw_dim=768, median_gap=0.5, median_is=2.0,
    )  # fmt: skip
    values.update(changes)
    return assess(Evidence(**values))


def test_high_trust_recommends_the_leader_in_plain_words():
    out = verdict(EIGHT, estimator="flow", trust=_trust(), controls=CONTROLS)
    assert out["recommended"] == out["leading"] == "m0" and out["trust"]["level"] == "high"
    assert out["headline"] == "The label-free ranking puts m0 first, and every check of it passed."
    assert "every check of this ranking passed" in out["summary"]
    assert [c["model"] for c in out["controls"]] == ["random", "shuffled"]
    assert "would rank last" in out["controls"][0]["text"]
    assert [r["model"] for r in out["ranking"]] == [f"m{i}" for i in range(8)]
    assert out["version"] == 2 and out["provisional"] is False


def test_low_trust_names_no_model_and_says_why():
    controls = CONTROLS.assign(score=[0.15, 0.0], would_rank=[6, 9])  # random weights above m5..m7
    out = verdict(EIGHT, estimator="flow", trust=_trust(controls=controls), controls=controls)
    assert out["recommended"] is None and out["leading"] == "m0"
    assert out["headline"] == "The label-free ranking cannot be trusted on this corpus."
    assert "random weights (random) scored above m5, m6 and m7" in out["summary"]
    assert "For information only, m0 leads the ranking." in out["summary"]
    assert "would rank 6th of 9, above m5, m6 and m7" in out["controls"][0]["text"]


def test_estimators_that_disagree_never_give_a_recommendation():
    out = verdict(EIGHT, estimator="flow", trust=_trust(agreement=-0.14), controls=CONTROLS)
    assert out["recommended"] is None and "opposite orders" in out["summary"]


def test_moderate_trust_recommends_and_gives_the_warnings():
    tied = _scores([("a", 0.5, 0.40, 0.60), ("b", 0.45, 0.35, 0.55), *EIGHT.iloc[2:].itertuples(index=False)])
    out = verdict(tied, estimator="gmm", trust=_trust(scores=tied), controls=CONTROLS)
    assert out["recommended"] == "a" and out["trust"]["level"] == "moderate"
    assert out["headline"] == "The label-free ranking puts a first, with moderate confidence."
    assert "a cannot be told apart from b" in out["summary"] and out["tied_with"] == ["b"]


def test_partial_models_are_flagged_and_provisional_verdicts_marked():
    out = verdict(EIGHT, estimator="flow", trust=_trust(), partial=["m0"], provisional=True)
    assert out["headline"].startswith("Provisional: the label-free ranking puts m0 (a partial model")
    assert "final verdict comes when the run ends" in out["summary"]
    assert out["ranking"][0]["role"] == "partial"


def test_failed_models_are_named_and_bad_input_refused():
    out = verdict(EIGHT, estimator="flow", trust=_trust(), failed=["x", "y"])
    assert "Not ranked because they failed: x and y." in out["text"]
    assert overlapping(_scores([("a", 0.5, 0.4, 0.6), ("b", 0.45, 0.35, 0.55)]), "a") == ["b"]
    with pytest.raises(ValueError, match="no scores"):
        verdict(EIGHT.iloc[:0], estimator="flow", trust=_trust())
    with pytest.raises(ValueError, match="TrustAssessment"):
        verdict(EIGHT, estimator="flow", trust="high")  # type: ignore[arg-type]
