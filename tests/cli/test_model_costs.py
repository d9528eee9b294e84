"""``flare models`` with costs, ``--measure``, the expected time of a corpus and the budget options."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from flare_core.answer.stored import load_verdict
from flare_core.cli.model_commands import budget_models, budget_result
from flare_core.encoders.cost import PeakMemory, load_measurements, save_measurements, vector_bytes
from flare_core.encoders.model_costs import budget_reasons
from flare_core.run.eta import describe_duration, expected_embedding_seconds
from tests.support import flare, flare_here


def test_models_json_lists_sixteen_candidates_with_their_family_and_costs(tmp_path):
    rows = json.loads(flare_here("models", "--json", runs_dir=tmp_path).stdout)
    trained = [r for r in rows if r["role"] == "candidate" and r["available"]]
    assert len(trained) >= 16 and len({r["family"] for r in trained}) >= 6
    for row in rows:
        assert row["source"] and row["licence"] and row["family"]
        if row["dim"]:
            assert (row["bytes_per_vector_float32"], row["bytes_per_vector_int8"]) == (
                4 * row["dim"],
                row["dim"],
            )
    by_id = {r["id"]: r for r in rows}
    assert 80 < by_id["all-MiniLM-L6-v2"]["model_size_mib"] < 200  # its safetensors weights alone are 87 MiB
    assert by_id["tfidf-svd-256"]["model_size_mib"] is None  # fitted on each corpus: no files


def test_measure_stores_each_models_speed_and_memory(tmp_path):
    proc = flare(
        "models", "--measure", "--texts", "40", "--models", "glove-6b-50d,tfidf-svd-256", "--json",
        runs_dir=tmp_path,
    )  # fmt: skip
    by_id = {r["id"]: r for r in json.loads(proc.stdout)}
    for model in ("glove-6b-50d", "tfidf-svd-256"):
        row = by_id[model]
        assert row["texts_per_s"] > 0 and row["peak_memory_mib"] >= 0 and row["measured_texts"] == 40
        assert row["by_device"]["cpu"]["texts"] == 40 and row["chars_per_s"] > row["texts_per_s"]
    assert by_id["all-mpnet-base-v2"]["texts_per_s"] is None  # not measured
    assert set(load_measurements()["cpu"]) >= {"glove-6b-50d", "tfidf-svd-256"}


def test_expected_time_scales_the_measured_speed_to_the_corpus(monkeypatch, tmp_path):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    save_measurements({"fast": {"chars_per_s": 1000.0, "load_s": 2.0}, "slow": {"chars_per_s": 10.0}}, "cpu")
    texts = ["x" * 2500, "y" * 2500]
    seconds, unmeasured = expected_embedding_seconds(["fast", "slow", "other"], texts, device="cpu")
    assert seconds == pytest.approx({"fast": 2.0 + 5000 / 1000, "slow": 5000 / 10})
    assert unmeasured == ["other"]
    assert [describe_duration(s) for s in (3, 42, 500, 9000)] == [
        "under 10 s",
        "about 40 s",
        "about 8 min",
        "about 2.5 h",
    ]


def test_budget_leaves_out_wide_or_slow_models_and_keeps_unknown_ones():
    widths = {"wide": 768, "narrow": 64, "unknown": None, "slow": 100}
    speeds = {"wide": 900.0, "narrow": 5000.0, "unknown": None, "slow": 50.0}
    reasons = budget_reasons(list(widths), max_width=256, min_texts_per_s=500, widths=widths, speeds=speeds)
    assert reasons == {"wide": "768 dimensions, more than 256", "slow": "50 texts per second, fewer than 500"}
    args = argparse.Namespace(max_width=60, min_texts_per_s=None)
    assert budget_models(["glove-6b-50d", "all-MiniLM-L6-v2"], args) == ["glove-6b-50d"]
    with pytest.raises(ValueError, match="no model of --models fits"):
        budget_models(["all-MiniLM-L6-v2"], args)
    with pytest.raises(ValueError, match="max_width"):
        budget_reasons(["a"], max_width=0, widths={}, speeds={})


def test_show_names_the_best_model_within_a_budget(labelled_run):
    result = budget_result(labelled_run, argparse.Namespace(max_width=100, min_texts_per_s=None))
    assert result["left_out"] == {"all-MiniLM-L6-v2": "384 dimensions, more than 100"}
    accuracy = {r["model"]: r["accuracy"] for r in load_verdict(labelled_run)["labels"]["rows"]}
    accuracy.pop("all-MiniLM-L6-v2")
    assert result["best"] == max(accuracy, key=accuracy.get)  # the answer's own grounds: the labels
    assert result["sentence"].startswith(f"Best at most 100 dimensions: {result['best']}")
    proc = flare_here("show", labelled_run.id, "--max-width", "100", runs_dir=labelled_run.path.parent)
    assert "outside the budget: all-MiniLM-L6-v2 (384 dimensions, more than 100)" in proc.stdout


def test_peak_memory_sees_an_allocation_and_vector_bytes_by_hand():
    with PeakMemory() as memory:
        block = bytearray(os.urandom(64 * 2**20))
    assert 50 <= memory.peak_mib < 500 and len(block) == 64 * 2**20
    assert vector_bytes(384) == {"bytes_per_vector_float32": 1536, "bytes_per_vector_int8": 384}
    with pytest.raises(ValueError, match="dim"):
        vector_bytes(0)
