"""Run parameters from a person's choices (one builder for ``flare run`` and the New run page), and the
inputs a new run reads."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from flare_core.analyses.sufficiency.registry import ESTIMATOR_NAMES
from flare_core.run.inputs import available_models, preview_table
from flare_core.run.params import ESTIMATOR_CHOICES, RunParams, build_params
from tests.support import STATIC


def test_both_estimators_and_collapse_switch_both_token_stages():
    params = build_params(models=STATIC, seed=3, collapse_texts=12, workers=2)
    assert params.estimators == list(ESTIMATOR_NAMES) == ["flow", "gmm"]
    assert params.collapse and params.concentration
    assert (params.seed, params.collapse_texts, params.workers) == (3, 12, 2)
    off = build_params(models=STATIC, estimator="gmm", collapse=False)
    assert off.estimators == ["gmm"] and not off.collapse and not off.concentration
    assert ESTIMATOR_CHOICES == ("both", "flow", "gmm")


def test_the_builder_fills_what_the_dataclass_defaults_and_nothing_else():
    built = build_params(models=["glove-6b-50d"], estimator="flow", references=["tfidf-svd-256"])
    plain = RunParams(models=["glove-6b-50d"], estimators=["flow"], reference_pool=["tfidf-svd-256"])
    assert dataclasses.asdict(built) == dataclasses.asdict(plain)


def test_each_preset_brings_its_whitened_width_and_its_estimator_configurations():
    from flare_core.analyses.sufficiency import FlowConfig, GMMConfig, get_estimator

    assert build_params(models=STATIC).max_dims == 32
    assert build_params(models=STATIC, flow_preset="paper").max_dims == 128
    assert build_params(models=STATIC, flow_preset="paper", max_dims=None).max_dims is None
    assert build_params(models=STATIC, flow_preset="fast", max_dims=16).max_dims == 16
    flow, gmm = get_estimator("flow"), get_estimator("gmm")
    assert flow.run_config("paper") == flow.run_config("default") == FlowConfig()
    assert flow.run_config("fast") == FlowConfig.fast()
    assert gmm.run_config("paper") == GMMConfig.knife() != gmm.run_config("default") == GMMConfig()
    assert gmm.run_config("fast") == GMMConfig.fast()


def test_builtin_references_are_every_available_builtin_model_not_chosen():
    params = build_params(models=["glove-6b-50d"], references=["builtin"])
    available, _ = available_models()
    assert params.reference_pool == [m for m in available if m != "glove-6b-50d"]
    assert "glove-6b-50d" not in params.reference_pool and "tokenlearn-static-64d" in params.reference_pool


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ({"estimator": "knn"}, r"estimator must be one of \['both', 'flow', 'gmm'\], got 'knn'"),
        ({"collapse_texts": 1}, r"collapse_texts must be an integer >= 2 \(SOCM compares pairs of texts\)"),
        ({"workers": 0}, "workers must be a positive integer or None, got 0"),
        ({"workers": 2, "executor": "ray"}, "workers sizes the local process pool"),
        ({"flow_preset": "huge"}, "unknown flow preset 'huge'"),
        ({"autocast": "yes"}, "autocast must be True or False"),
    ],
)
def test_bad_choices_are_refused_with_a_specific_message(choices, message):
    with pytest.raises(ValueError, match=message):
        build_params(models=STATIC, **choices)


def test_unknown_ids_are_refused_with_close_matches_and_hub_ids_pass():
    with pytest.raises(ValueError, match=r"unknown model 'all-minilm-l6': did you mean 'all-MiniLM-L6-v2'"):
        build_params(models=["glove-6b-50d", "all-minilm-l6"])
    with pytest.raises(ValueError, match=r"unknown model 'nonsense': Use a built-in id"):
        build_params(models=["glove-6b-50d"], references=["nonsense"])
    assert build_params(models=["sentence-transformers/all-MiniLM-L12-v2"]).models == [
        "sentence-transformers/all-MiniLM-L12-v2"
    ]


def test_a_model_twice_is_refused():
    with pytest.raises(ValueError, match="a model is listed twice"):
        build_params(models=["glove-6b-50d", "glove-6b-50d"])


def test_stored_parameters_round_trip_and_ignore_unknown_fields():
    params = build_params(models=STATIC, seed=5)
    again = RunParams.from_dict({**dataclasses.asdict(params), "a_field_of_a_later_version": 1})
    assert again == params


def test_preview_reads_the_table_and_guesses_its_columns():
    data = pd.DataFrame(
        {"id": range(6), "body": [f"text number {k} here" for k in range(6)], "topic": ["a", "b"] * 3}
    )
    frame, info, detected = preview_table(data.to_csv(index=False).encode(), name="up.csv", max_bytes=10_000)
    assert list(frame.columns) == ["id", "body", "topic"] and len(frame) == 6
    assert info["format"] == "csv" and info["delimiter"] == ","
    assert detected["text"] == "body" and detected["label"] == "topic" and detected["pairs"] is None


def test_available_models_split_the_registry():
    available, missing = available_models()
    assert {"glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"} <= set(available)
    assert not set(available) & set(missing)
