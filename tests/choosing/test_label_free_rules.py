"""Label-free rules and their judgement, on hand-made cases whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.choosing import label_free_rules as rules


def _table(dim, flow, effective_rank=None):
    models = [f"m{i}" for i in range(len(dim))]
    table = pd.DataFrame({"dim": dim, "flow": flow}, index=models, dtype=float)
    if effective_rank is not None:
        table["effective_rank"] = effective_rank
    return table


def _case(name, table, oracle):
    return {
        "case": name,
        "table": table,
        "oracle": pd.Series(oracle, index=table.index),
        "models": list(table.index),
    }


def test_width_then_flow_breaks_ties_of_width_by_information_sufficiency():
    table = _table([384, 768, 384, 50], [0.30, 0.10, 0.20, 0.40])
    assert rules.ranked_by(table, "width_then_flow") == ["m1", "m0", "m2", "m3"]
    assert rules.top_models(table, "dim") == ["m1"]
    assert rules.ranked_by(table, "width_and_flow")[:2] == [
        "m0",
        "m1",
    ]  # ranks (dim, flow): m0 (2.5, 3), m1 (4, 1)


def test_a_tie_at_the_top_counts_as_a_draw_among_the_tied_models():
    table = _table([384, 384, 50], [0.1, 0.2, 0.3])
    oracle = pd.Series([0.90, 0.80, 0.70], index=table.index)
    assert rules.top_models(table, "dim") == ["m0", "m1"]
    assert rules.points_lost(oracle, ["m0", "m1"], table.index) == pytest.approx(5.0)  # mean of 0 and 10
    assert np.isnan(rules.points_lost(oracle, [], table.index))


def test_a_rule_without_its_score_scores_nothing():
    table = _table([10, 20], [0.1, 0.2])
    assert rules.rule_scores(table, "gmm").isna().all() and rules.top_models(table, "gmm") == []
    with pytest.raises(ValueError, match="unknown rule 'size'"):
        rules.rule_scores(table, "size")


def test_judging_and_choosing_by_hand():
    # width is right on a and b, information sufficiency on c only
    a = _case("a", _table([768, 384, 50], [0.1, 0.2, 0.3]), [0.9, 0.8, 0.7])
    b = _case("b", _table([768, 384, 50], [0.3, 0.2, 0.1]), [0.9, 0.8, 0.7])
    c = _case("c", _table([768, 384, 50], [0.1, 0.3, 0.2]), [0.7, 0.9, 0.8])
    judged = rules.judge_rule([a, b, c], "dim").set_index("case")
    assert judged["lost"].tolist() == pytest.approx([0.0, 0.0, 20.0])
    assert judged["short_list_lost"].tolist() == pytest.approx([0.0, 0.0, 0.0])  # 3 models: all short-listed
    assert judged.loc["a", "rho"] == pytest.approx(1.0) and judged.loc["c", "rho"] == pytest.approx(-0.5)
    table = rules.rule_table([a, b, c], ["dim", "flow"]).set_index("rule")
    assert table.loc["dim", "mean_lost"] == pytest.approx(20 / 3) and table.loc[
        "dim", "worst_lost"
    ] == pytest.approx(20)
    assert table.loc["flow", "mean_lost"] == pytest.approx(20 / 3)  # flow: lost 20 on a, 0 on b and c
    assert table.loc["dim", "mean_rho"] == pytest.approx(0.5)  # (1 + 1 - 0.5) / 3
    assert table.loc["flow", "mean_rho"] == pytest.approx(1 / 3)  # (-1 + 1 + 1) / 3
    assert rules.choose_rule([a, b, c], ["dim", "flow"]) == "dim"  # the higher mean Spearman


def test_leave_one_corpus_out_judges_each_corpus_by_a_rule_chosen_on_the_others():
    a = _case("a", _table([768, 384, 50], [0.1, 0.2, 0.3]), [0.9, 0.8, 0.7])
    b = _case("b", _table([768, 384, 50], [0.1, 0.2, 0.3]), [0.9, 0.8, 0.7])
    c = _case("c", _table([768, 384, 50], [0.1, 0.3, 0.2]), [0.7, 0.9, 0.8])
    out = rules.leave_one_corpus_out([a, b, c], ["dim", "flow"])
    chosen = {row["case"]: row["rule"] for row in out["rows"]}
    assert chosen == {"a": "dim", "b": "dim", "c": "dim"}
    assert out["mean_lost"] == pytest.approx(20 / 3) and out["worst_lost"] == pytest.approx(20)
    assert out["final"] == "dim" and out["cases"] == 3


def test_one_case_alone_leaves_nothing_to_choose_a_rule_on():
    a = _case("a", _table([768, 384, 50], [0.1, 0.2, 0.3]), [0.9, 0.8, 0.7])
    out = rules.leave_one_corpus_out([a])
    assert out["rows"] == [] and out["cases"] == 0 and out["mean_lost"] is None and out["final"] == "dim"
    assert rules.rule_table([]).empty and rules.choose_rule([]) is None


def test_a_model_that_cannot_read_the_corpus_comes_after_every_one_that_can():
    table = pd.DataFrame(
        {"dim": [768.0, 384.0, 512.0, 256.0], "reads_corpus": [0.0, 1.0, 1.0, np.nan]},
        index=["english-wide", "many-narrow", "many-mid", "unknown"],
    )
    # the widest reads English only: on a corpus that is not, the widest model that can read it leads
    assert rules.ranked_by(table, "dim") == ["many-mid", "many-narrow", "unknown", "english-wide"]
    assert rules.top_models(table, "dim") == ["many-mid"]
    assert rules.ranked_by(table.drop(columns="reads_corpus"), "dim")[0] == "english-wide"
    # when no model can read it (or the table does not say), the rule's own order stands
    none_read = table.assign(reads_corpus=0.0)
    assert rules.ranked_by(none_read, "dim") == ["english-wide", "many-mid", "many-narrow", "unknown"]


def test_a_model_that_reads_too_few_of_the_texts_cannot_read_the_corpus():
    # reads_corpus is the share of the corpus's texts a model reads (a half-English corpus: 0.5 for English
    # models); under READ_SHARE (0.8) it cannot read the corpus, a share not known says nothing
    table = pd.DataFrame(
        {"dim": [768.0, 384.0, 512.0, 256.0], "reads_corpus": [0.5, 1.0, 0.85, np.nan]},
        index=["english-wide", "many-narrow", "english-mid", "unknown"],
    )
    assert rules.cannot_read(table).tolist() == [True, False, False, False]
    assert rules.ranked_by(table, "dim") == ["english-mid", "many-narrow", "unknown", "english-wide"]
