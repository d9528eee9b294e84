"""How many worker processes the density stages start, and how many conditionals share one model."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from flare_core.analyses.sufficiency import FlowConfig, SufficiencyResult, sufficiency_matrix
from flare_core.analyses.sufficiency.flows import FlowEstimator
from flare_core.data.corpus import load_corpus
from flare_core.run import jobs, stages, sufficiency_stage
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore
from tests.support import STATIC

MODELS = ["glove-6b-50d", "tokenlearn-static-64d"]
BIG = {"is_units": 24 * 11, "n_texts": 2000}


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 2), (6, 6), (16, 8), (64, 8)])
def test_a_large_matrix_on_the_cpu_gets_a_worker_per_core_at_most_eight(monkeypatch, cores, expected):
    monkeypatch.setattr(stages.os, "cpu_count", lambda: cores)
    params = RunParams(MODELS, device="cpu")
    assert stages.pool_workers(params, **BIG) == expected
    # every conditional of a target in one batched model, on the CPU too
    assert sufficiency_stage.conditionals_per_model(params, 15) == 15


def test_a_small_matrix_or_corpus_stays_in_this_process(monkeypatch):
    monkeypatch.setattr(stages.os, "cpu_count", lambda: 16)
    params = RunParams(MODELS, device="cpu")
    assert stages.pool_workers(params, is_units=23, n_texts=2000) == 1
    assert stages.pool_workers(params, is_units=240, n_texts=999) == 1


def test_asked_for_workers_and_batches_are_kept(monkeypatch):
    monkeypatch.setattr(sufficiency_stage, "densities_on_cuda", lambda params: True)
    params = RunParams(MODELS, workers=3, batch_conditionals=5)
    assert stages.pool_workers(params, **BIG) == 3
    assert sufficiency_stage.conditionals_per_model(params, 15) == 5
    one_by_one = RunParams(MODELS, device="cpu", batch_conditionals=1).validate()
    assert sufficiency_stage.conditionals_per_model(one_by_one, 15) == 1


def test_on_cuda_four_workers_each_train_every_conditional_of_a_target_together(monkeypatch):
    monkeypatch.setattr(stages.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(stages, "densities_on_cuda", lambda params: True)
    monkeypatch.setattr(sufficiency_stage, "densities_on_cuda", lambda params: True)
    params = RunParams(MODELS)
    assert stages.pool_workers(params, **BIG) == 4
    assert sufficiency_stage.conditionals_per_model(params, 15) == 15


def test_the_densities_follow_the_run_device():
    assert sufficiency_stage.densities_on_cuda(RunParams(MODELS, device="cpu")) is False


def test_a_resumed_run_trains_as_its_stored_units_were_trained(tmp_path):
    rng = np.random.default_rng(0)
    pool = {name: rng.standard_normal((60, 3)).astype(np.float32) for name in ("a", "b", "c")}
    tiny = FlowConfig(n_transforms=1, hidden_features=8, rank=2, max_epochs=1, max_epochs_conditional=1)
    assert sufficiency_stage.stored_options(tmp_path) == {}  # nothing stored yet: the run's own rule
    sufficiency_matrix(pool, config=tiny, store_dir=tmp_path)
    stored = {"batch_conditionals": 1, "batch_targets": 1, "even_batches": True, "fused_adam": True}
    assert sufficiency_stage.stored_options(tmp_path) == stored
    automatic = RunParams(MODELS, device="cpu")
    assert sufficiency_stage.conditionals_per_model(automatic, 2, stored=1) == 1
    # a store written before these fields existed was trained one conditional at a time, with batches of
    # batch_size and a short last one, and the multi-tensor Adam: it resumes so
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for key in stored:
        del manifest["config"][key]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    earlier = sufficiency_stage.stored_options(tmp_path)
    assert earlier == {
        "batch_conditionals": 1,
        "batch_targets": 1,
        "even_batches": False,
        "fused_adam": False,
    }
    config = FlowEstimator().run_config("default", **earlier)
    assert sufficiency_matrix(pool, config=dataclasses.replace(tiny, **earlier), store_dir=tmp_path)
    assert (config.even_batches, config.fused_adam) == (False, False)


def test_a_default_run_trains_each_targets_conditionals_as_one_model(tmp_path, articles, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path / "cache"))
    articles.to_csv(tmp_path / "articles.csv", index=False)
    corpus = load_corpus(tmp_path / "articles.csv", text_column="text", label_column="label")
    models = [*STATIC, "tfidf-svd-256"]
    params = RunParams(
        models=models, estimators=["flow"], flow_preset="fast", collapse=False, concentration=False,
        maps=False, validation=[], downstream=False, geometry=False, controls=[], max_dims=4,
    )  # fmt: skip
    run = create_run(RunStore(tmp_path / "runs"), corpus, params)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    assert run.manifest["params"]["batch_conditionals"] is None  # saved as asked: automatic
    result = SufficiencyResult.load(run.artefact("sufficiency", "flow", "result"))
    assert result.config["batch_conditionals"] == 2  # what was used: both sources of each target
    assert np.isfinite(result.is_matrix.to_numpy()[~np.eye(3, dtype=bool)]).all()
    # one unit per target's conditionals: 3 embeddings, 3 marginals and 3 groups (not 6 pairs) were run
    assert sum(w["units"] for w in run.manifest["workers"].values()) == 9
    assert (
        sufficiency_stage.stored_options(run.artefact("sufficiency", "flow", "pairs"))["batch_conditionals"]
        == 2
    )
