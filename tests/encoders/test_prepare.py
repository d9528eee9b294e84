"""Every model of the pool made ready ahead of a first run (``flare models --prepare``): the steps left,
each done once, a run's first use waiting for a build under way instead of repeating it. A distilled model
of a tiny random BERT (with MiniLM's vocabulary) stands for the pool's three bases."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from flare_core.encoders import builtin, extra_models
from flare_core.encoders.distil import distil_ready
from flare_core.encoders.extra_models import DistilBase, build_distils
from flare_core.encoders.prepare import pending_steps, prepare_models, start_in_background
from tests.encoders._helpers import tiny_bert
from tests.support import flare_here


class TinyBase:
    """A distil base over a tiny random BERT, counting the forward passes over the vocabulary."""

    def __init__(self) -> None:
        self.model = tiny_bert().model
        self.calls = 0
        self.lock = threading.Lock()

    def forward(self):
        def run(ids: np.ndarray) -> np.ndarray:
            with self.lock:
                self.calls += 1
            batch = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
            with torch.inference_mode():
                return self.model(input_ids=batch).last_hidden_state.mean(1).numpy()

        return run, 101, 102

    def base(self) -> DistilBase:
        return DistilBase(
            "tiny-bert",
            "tiny",
            "n/a",
            lambda: builtin.minilm_dir() / "tokenizer.json",
            lambda: "tiny-1",
            self.forward,
            lambda: True,
            3.0,
        )


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A cache folder of its own whose pool has one distil base, the tiny one, at widths 16 and 8, and no
    all-mpnet-base-v2 to unpack."""
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    tiny = TinyBase()
    monkeypatch.setattr(extra_models, "DISTIL_BASES", (tiny.base(),))
    monkeypatch.setattr(extra_models, "DISTIL_WIDTHS", (16, 8))
    monkeypatch.setattr(builtin, "mpnet_available", lambda: False)
    return tiny


def test_a_fresh_cache_has_mpnet_and_every_distil_to_make_ready(tmp_path, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    steps = pending_steps()
    assert [step.name for step in steps] == [
        "unpacking all-mpnet-base-v2",
        "building m2v-paraphrase-l3-256 and m2v-paraphrase-l3-64 from paraphrase-MiniLM-L3-v2",
        "building m2v-minilm-l6-256 and m2v-minilm-l6-64 from all-MiniLM-L6-v2",
        "building m2v-mpnet-256 and m2v-mpnet-64 from all-mpnet-base-v2",
    ]  # cheapest first
    assert sum(len(step.models) for step in steps) == 7


def test_prepare_builds_each_model_once_and_says_so(tiny):
    lines: list[str] = []
    took = prepare_models(progress=lines.append)
    assert list(took) == ["building m2v-tiny-16 and m2v-tiny-8 from tiny-bert"] and took[list(took)[0]] >= 0
    assert distil_ready("m2v-tiny-16", "tiny-1") and distil_ready("m2v-tiny-8", "tiny-1")
    assert lines[0] == "making 2 models ready ahead of a first run (about 3 s on 2 cores)"
    assert lines[1] == "[1/1] building m2v-tiny-16 and m2v-tiny-8 from tiny-bert (about 3 s) ..."
    assert lines[2].startswith("[1/1] done in ") and lines[2].endswith("s: m2v-tiny-16, m2v-tiny-8 ready")
    assert lines[-1] == "every model of the pool is ready"
    calls = tiny.calls
    assert calls == 29 and pending_steps() == []  # MiniLM's vocabulary less its unused tokens, 1,024 a batch
    # done twice: nothing to do, no forward pass
    lines.clear()
    assert prepare_models(progress=lines.append) == {}
    assert lines == ["every model of the pool is ready"] and tiny.calls == calls
    assert start_in_background() is None  # a later launch of the app starts nothing


def test_a_run_needing_a_model_under_construction_waits_for_that_build(tiny):
    """Two processes' threads (the background preparation and a run's first use) ask for the same distils
    at once: one builds them, the other waits on the lock and finds them built."""
    built: list[bool] = []
    base = extra_models.DISTIL_BASES[0]
    threads = [threading.Thread(target=lambda: built.append(build_distils(base))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(built) == [False, True] and tiny.calls == 29


def test_flare_models_prepare_prints_its_progress(tiny, tmp_path):
    proc = flare_here("models", "--prepare", runs_dir=tmp_path / "runs")
    assert "[1/1] building m2v-tiny-16 and m2v-tiny-8 from tiny-bert" in proc.stdout
    assert proc.stdout.strip().endswith("every model of the pool is ready")
    again = flare_here("models", "--prepare", runs_dir=tmp_path / "runs")
    assert again.stdout.strip() == "every model of the pool is ready"
