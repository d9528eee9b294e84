"""The time left reads this machine's speeds: each model's measured by earlier runs, cached embeddings
costing their load alone, each stage's measured over its prior (hand-computed cases and real runs)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from flare_core.run.eta import (
    _EMBED_UNIT_SECONDS,
    StagePlan,
    StageState,
    measured_cost,
    remaining_seconds,
    run_plan,
)
from flare_core.run.stage_speeds import (
    apply_stage_speeds,
    keep_stage_speeds,
    load_stage_speeds,
    measured_ratios,
)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat()


def test_a_measured_speed_prices_reading_and_loading():
    # 2,000 characters a second: 100 characters in 0.05 s, 14.3 times MiniLM's prior 0.0035 s
    weight, load = measured_cost("transformer", {"chars_per_s": 2000.0, "load_s": 1.5}, cached=False)
    assert weight * _EMBED_UNIT_SECONDS == pytest.approx(0.05)
    assert load * _EMBED_UNIT_SECONDS == pytest.approx(1.5)
    # cached: nothing to read, the load alone
    assert measured_cost("transformer", {"chars_per_s": 2000.0, "load_s": 1.5}, cached=True) == (
        0.0,
        pytest.approx(1.5 / _EMBED_UNIT_SECONDS),
    )
    # a model fitted on the corpus: its speed already counts the fit, it loads for nothing more
    assert measured_cost("corpus", {"chars_per_s": 2000.0, "load_s": 3.0}, cached=False)[1] == 0.0
    assert measured_cost("static", {"load_s": 1.0}, cached=False) is None


def _plan(costs):
    return run_plan(
        n_texts=500,
        n_fit=450,
        costs=costs,
        corpus_units=500.0,
        estimators=["gmm"],
        is_units=12,
        is_pool=False,
        collapse_models=[],
        collapse_texts=[],
        max_length=256,
        geometry=True,
        downstream=False,
        validation=False,
        maps=False,
        collapse=False,
        concentration=False,
    )


def test_a_cached_run_is_not_taken_for_a_fast_machine():
    """Issue 62: a run whose embeddings were all cached said "under a minute left" from 23 s to 206 s. Its
    plan priced reading the corpus; the cache took a second, so the run seemed 30 times faster than its
    plan and every later stage was priced at a thirtieth. Priced from the cache (the loads alone), the
    stages after it keep their own cost."""
    record = {"chars_per_s": 20_000.0, "load_s": 0.5}
    fresh = {m: measured_cost("transformer", record, cached=False) for m in ("a", "b")}
    cached = {m: measured_cost("transformer", record, cached=True) for m in ("a", "b")}
    # the libraries load (1 s) and each model reads 50,000 characters; cached, each loads alone
    for costs, expected_embed in ((fresh, 1.0 + 2 * (0.5 + 500 * 100 / 20_000)), (cached, 1.0 + 2 * 0.5)):
        plan = _plan(costs)
        assert plan[0].total_prior == pytest.approx(expected_embed, rel=0.01)
    plan = _plan(cached)
    later = sum(stage.total_prior for stage in plan[1:])
    # the cached embeddings took 2 s, as planned: the rest costs its prior
    states = {"embeddings": StageState(plan[0].units, 0.0, 2.0)}
    assert remaining_seconds(plan, states, now=2.0) == pytest.approx(later, rel=0.01)
    # priced as if read (the plan before, 7 s): the same 2 s seem 3.5 times faster than planned
    wrong = _plan(fresh)
    states = {"embeddings": StageState(wrong[0].units, 0.0, 2.0)}
    assert remaining_seconds(wrong, states, now=2.0) == pytest.approx(later * 2 / 7, rel=0.01)


def test_a_stage_measured_over_its_prior_is_kept_and_scales_the_next_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    plan = [
        {"name": "embeddings", "units": 100, "prior_seconds": 0.1},
        {"name": "sufficiency_flow", "units": 10, "prior_seconds": 2.0, "fixed_seconds": 4.0},
        {"name": "geometry", "units": 4, "prior_seconds": 0.25},
    ]
    stages = {
        "embeddings": {"started": _stamp(0), "finished": _stamp(30)},
        "sufficiency_flow": {"started": _stamp(30), "finished": _stamp(78)},  # 48 s for 24 prior: 2.0
        "geometry": {"started": _stamp(78), "finished": _stamp(78.5)},  # under a second: too short to keep
    }
    manifest = {"base_plan": plan, "plan": [], "stages": stages}
    assert measured_ratios(manifest) == {"sufficiency_flow": pytest.approx(2.0)}
    # one run behind it: drawn halfway to the priors (in ratio), the square root of 2
    assert keep_stage_speeds(manifest) == {"sufficiency_flow": pytest.approx(2**0.5)}
    # a second run at 8 times its prior: the geometric mean of 2 and 8 is 4, two runs behind it: 4 ** (2/3)
    stages["sufficiency_flow"]["finished"] = _stamp(30 + 8 * 24)
    assert keep_stage_speeds(manifest)["sufficiency_flow"] == pytest.approx(4 ** (2 / 3))
    assert json.loads((tmp_path / "stage_speeds.json").read_text())["stages"]["sufficiency_flow"] == {
        "ratio": 4.0,
        "runs": 2,
    }
    scaled = apply_stage_speeds(
        [StagePlan("embeddings", 100, 0.1), StagePlan("sufficiency_flow", 10, 2.0, 4.0)],
        {**load_stage_speeds(), "embeddings": 9.0},
    )
    assert scaled[0] == StagePlan("embeddings", 100, 0.1)  # its plan reads each model's speed already
    assert scaled[1].prior_seconds == pytest.approx(2.0 * 4 ** (2 / 3))
    assert scaled[1].fixed_seconds == pytest.approx(4.0 * 4 ** (2 / 3))
    # many runs at 4: the figure stops growing its weight at 9 runs, 4 ** (9/10)
    for _ in range(12):
        stages["sufficiency_flow"]["finished"] = _stamp(30 + 4 * 24)
        kept = keep_stage_speeds(manifest)["sufficiency_flow"]
    assert kept == pytest.approx(4**0.9, rel=1e-3)


def test_a_damaged_speeds_file_is_no_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    (tmp_path / "stage_speeds.json").write_text("{not json")
    assert load_stage_speeds() == {}
    (tmp_path / "stage_speeds.json").write_text(json.dumps({"stages": {"maps": {"ratio": 1e9}}}))
    assert load_stage_speeds() == {}


def _run(store, corpus_path, models):
    from flare_core.data.corpus import load_corpus
    from flare_core.run import jobs
    from flare_core.run.create import create_run
    from flare_core.run.params import RunParams

    params = RunParams(
        models=models,
        estimators=["gmm"],
        controls=[],
        geometry=True,
        maps=False,
        downstream=False,
        validation=[],
        collapse=False,
        concentration=False,
    )
    run = create_run(store, load_corpus(corpus_path, text_column="text"), params)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    return run


def test_a_run_keeps_each_models_speed_and_the_next_run_reads_it_and_the_cache(tmp_path, monkeypatch):
    """A first run on an empty cache measures glove and TF-IDF on 120 texts and keeps their speeds as this
    machine's; the New run page's estimate then has them. A second run of the same texts finds both
    cached: its plan prices their loads alone, and its stages at this machine's speed."""
    from flare_core.data.demo import bbc_news_frame
    from flare_core.encoders.cost import load_measurements
    from flare_core.run.eta import cached_for_corpus, expected_embedding_seconds
    from flare_core.store.runs import RunStore

    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path / "cache"))
    frame = bbc_news_frame(n_per_topic=24, seed=0)[["text"]]
    frame.to_csv(tmp_path / "c.csv", index=False)
    store = RunStore(tmp_path / "runs")
    models = ["glove-6b-50d", "tfidf-svd-256"]
    texts = frame["text"].tolist()
    assert expected_embedding_seconds(models, texts, device="cpu") == ({}, models)  # nothing measured

    first = _run(store, tmp_path / "c.csv", models)
    kept = load_measurements()["cpu"]
    for model in models:
        stored = next(m for m in first.manifest["models"] if m["id"] == model)
        assert kept[model]["from"] == "run" and kept[model]["texts"] == len(texts) == 120
        assert kept[model]["chars_per_s"] == stored["chars_per_s"] > 0
    seconds, unmeasured = expected_embedding_seconds(models, texts, device="cpu")
    assert set(seconds) == set(models) and unmeasured == []
    kept_speeds = load_stage_speeds()
    # one run behind each figure: the square root of what it measured
    assert kept_speeds == pytest.approx(
        {k: v**0.5 for k, v in measured_ratios(first.manifest).items()}, rel=1e-3
    )

    corpus_hash = first.manifest["corpus"]["content_hash"]
    assert cached_for_corpus(models, corpus_hash, 256) == models
    assert cached_for_corpus(models, corpus_hash, 128) == []  # another max_length: another entry
    cached_seconds, _ = expected_embedding_seconds(models, texts, device="cpu", cached=models)
    assert cached_seconds == {m: pytest.approx(kept[m]["load_s"]) for m in models}

    second = _run(store, tmp_path / "c.csv", models)
    planned = {row["name"]: row for row in second.manifest["plan"]}
    loads = sum(kept[m]["load_s"] for m in models)  # glove's load, TF-IDF's fit; nothing is read
    assert planned["embeddings"]["units"] * _EMBED_UNIT_SECONDS == pytest.approx(loads, abs=0.01)
    assert planned["embeddings"]["fixed_seconds"] == 1.0  # the libraries load all the same
    assert second.manifest["stages"]["embeddings"]["work_done"] == planned["embeddings"]["units"]
    base = {row["name"]: row for row in second.manifest["base_plan"]}
    for name, row in planned.items():
        ratio = kept_speeds.get(name, 1.0) if name != "embeddings" else 1.0
        assert row["prior_seconds"] == pytest.approx(base[name]["prior_seconds"] * ratio, rel=1e-3)
