"""How many worker processes the density stages start, and how many conditionals share one model."""

from __future__ import annotations

import pytest

from flare_core.run import stages, sufficiency_stage
from flare_core.run.params import RunParams

MODELS = ["glove-6b-50d", "tokenlearn-static-64d"]
BIG = {"is_units": 24 * 11, "n_texts": 2000}


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 2), (6, 6), (16, 8), (64, 8)])
def test_a_large_matrix_on_the_cpu_gets_a_worker_per_core_at_most_eight(monkeypatch, cores, expected):
    monkeypatch.setattr(stages.os, "cpu_count", lambda: cores)
    params = RunParams(MODELS, device="cpu")
    assert stages.pool_workers(params, **BIG) == expected
    assert sufficiency_stage.conditionals_per_model(params, 15) == 1


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


def test_on_cuda_four_workers_each_train_every_conditional_of_a_target_together(monkeypatch):
    monkeypatch.setattr(stages.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(stages, "densities_on_cuda", lambda params: True)
    monkeypatch.setattr(sufficiency_stage, "densities_on_cuda", lambda params: True)
    params = RunParams(MODELS)
    assert stages.pool_workers(params, **BIG) == 4
    assert sufficiency_stage.conditionals_per_model(params, 15) == 15


def test_the_densities_follow_the_run_device():
    assert sufficiency_stage.densities_on_cuda(RunParams(MODELS, device="cpu")) is False
