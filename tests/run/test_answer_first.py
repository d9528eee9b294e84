"""The answer first: a real run of texts without labels embeds its candidates (the quickest first), then
its controls, writes the provisional answer as soon as the candidates are embedded, and draws the map
after; while the map is drawn, ``flare label --next``, ``flare show`` and *Check with a few labels* work
and say that the map is still being drawn.

The run is the real pipeline (``jobs.run_in_process``) with real models; the stage functions are wrapped
only to note when each one starts and to look at the run from outside at the start of the map."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from bench.speed.standard_run import answer_usable
from flare_core.answer.stored import load_verdict
from flare_core.data.corpus import load_corpus
from flare_core.run import embedding_stage, jobs, stages
from flare_core.run.create import create_run
from flare_core.run.embedding_stage import MIN_ANSWERED
from flare_core.store.runs import RunStore
from tests.support import STATIC, fast_params, flare_here, page_texts

APP = str(Path(__file__).resolve().parents[2] / "app.py")
#: A small transformer (ONNX): slower to embed with than the static models.
ONNX = "paraphrase-MiniLM-L3-v2"
#: A control as quick as the static candidates: the order puts it after them all the same.
CONTROL = "shuffled-glove-6b-50d"
DRAWING = "is still being drawn"


@pytest.fixture
def texts_only_run(tmp_path, articles):
    path = tmp_path / "texts.csv"
    articles[["text"]].to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column=None)
    params = fast_params([ONNX, *STATIC], controls=[CONTROL])
    return create_run(RunStore(tmp_path / "runs"), corpus, params)


def _noting(events: list, name: str, function):
    def noted(*args, **kwargs):
        events.append((name, args[0] if name == "embed" else None))
        return function(*args, **kwargs)

    return noted


def _looked_at_from_outside(run, runs_dir: Path, monkeypatch) -> dict:
    """The run as a person sees it while it works: whether the benchmark reads the answer as usable,
    ``flare label --next 16``, ``flare show``, the Overview's texts and *Check with a few labels*' texts and
    errors."""
    seen = {"usable": answer_usable(run.path, run.manifest)}  # the benchmark's reading of the moment
    seen["next"] = flare_here("label", run.id, "--next", "16", runs_dir=runs_dir)
    seen["show"] = flare_here("show", run.id, runs_dir=runs_dir)
    monkeypatch.setenv("FLARE_RUNS_DIR", str(runs_dir))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = run.id
    at.run()
    seen["overview"] = page_texts(at)
    at.switch_page("dashboard/labels.py").run()
    seen["page"], seen["page_errors"] = page_texts(at), [e.value for e in at.exception]
    return seen


def test_the_answer_comes_after_the_candidates_embeddings_and_before_the_map(
    texts_only_run, monkeypatch, tmp_path
):
    run, runs_dir = texts_only_run, tmp_path / "runs"
    events: list[tuple[str, str | None]] = []
    seen: dict = {}
    monkeypatch.setattr(embedding_stage, "_embed_task", _noting(events, "embed", embedding_stage._embed_task))
    monkeypatch.setattr(stages, "write_verdict", _noting(events, "verdict", stages.write_verdict))
    sufficiency = stages.sufficiency_stage

    def map_starts(*args, **kwargs):
        events.append(("map", None))
        seen["verdict"] = load_verdict(run)
        seen.update(_looked_at_from_outside(run, runs_dir, monkeypatch))
        return sufficiency(*args, **kwargs)

    monkeypatch.setattr(stages, "sufficiency_stage", map_starts)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")

    embedded = [model for name, model in events if name == "embed"]
    # candidates, quickest first (the two static ones in the order of the speeds measured on this machine,
    # which the suite's earlier runs leave); then the control
    assert sorted(embedded[:2]) == sorted(STATIC) and embedded[2:] == [ONNX, CONTROL]
    names = [name for name, _ in events]
    first_verdict = names.index("verdict")
    # the first answer once the quick group is in: at least two candidates, before the map; a third joins it
    # at once where the plan (this machine's measured speeds) prices it above the two together
    embeds = [i for i, name in enumerate(names) if name == "embed"]
    assert names.index("map") > first_verdict > embeds[MIN_ANSWERED - 1]
    assert names[first_verdict + 1] == "embed"  # the control is embedded after the answer

    verdict = seen["verdict"]
    assert verdict["basis"] == "label-free" and verdict["recommended"] in (ONNX, *STATIC)
    assert verdict["provisional"] and not verdict["run_finished"]
    assert DRAWING in verdict["map_headline"] and seen["usable"]
    batch = pd.read_csv(io.StringIO(seen["next"].stdout))
    assert list(batch.columns) == ["row", "text", "label"] and len(batch) == 16
    assert DRAWING in seen["show"].stdout and f"flare label {run.id} --next 16" in seen["show"].stdout
    assert seen["page_errors"] == []
    assert DRAWING in seen["page"] and "Name at least two categories" in seen["page"]

    final = load_verdict(run)
    assert final["run_finished"] and DRAWING not in final["map_headline"]
    assert final["ranking"], "the map's ranking joins the final answer"


TINY_BERT = {
    "model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128,
}  # fmt: skip
PENDING = "still being embedded"


@pytest.fixture
def two_group_run(tmp_path, articles):
    """Texts only; the two static candidates, then a random-init BERT saved as a local folder (priced as a
    transformer: more than both static models together), so that it is embedded after the answer."""
    from flare_core.encoders import random_init_transformer

    folder = tmp_path / "tiny-bert"
    encoder = random_init_transformer(dict(TINY_BERT), seed=0, device="cpu")
    encoder.model.save_pretrained(folder)
    encoder.tokenizer.save_pretrained(folder)
    path = tmp_path / "texts.csv"
    articles[["text"]].to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column=None)
    run = create_run(RunStore(tmp_path / "runs"), corpus, fast_params([*STATIC, str(folder)]))
    return run, str(folder)


def test_the_answer_comes_from_the_quick_candidates_and_names_those_still_being_embedded(
    two_group_run, monkeypatch, tmp_path
):
    (run, slow), runs_dir = two_group_run, tmp_path / "runs"
    events: list[tuple[str, str | None]] = []
    seen: dict = {}
    monkeypatch.setattr(embedding_stage, "_embed_task", _noting(events, "embed", embedding_stage._embed_task))
    write = stages.write_verdict

    def noted_verdict(*args, **kwargs):
        verdict = write(*args, **kwargs)
        events.append(("verdict", None))
        if verdict.get("pending") and "next" not in seen:  # the answer while the slow one embeds
            seen["verdict"] = verdict
            seen.update(_looked_at_from_outside(run, runs_dir, monkeypatch))
        return verdict

    monkeypatch.setattr(stages, "write_verdict", noted_verdict)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")

    embedded = [model for name, model in events if name == "embed"]
    assert sorted(embedded[:2]) == sorted(STATIC) and embedded[2:] == [slow]  # the statics, either first
    names = [name for name, _ in events]
    assert names.index("verdict") == 2  # after the two static models, before the slow one
    verdict = seen["verdict"]
    assert verdict["pending"] == [slow] and verdict["recommended"] in STATIC
    assert verdict["provisional"] and not verdict["settled"] and not verdict["run_finished"]
    assert f"1 model is {PENDING}: {slow}" in verdict["text"] and "checked again" in verdict["text"]
    assert verdict["headline"].startswith("So far, from 2 of 3 models: ")  # of the candidates chosen
    assert seen["usable"]  # the benchmark's reading: the answer names a model, the slow one pending
    batch = pd.read_csv(io.StringIO(seen["next"].stdout))
    assert list(batch.columns) == ["row", "text", "label"] and len(batch) == 16
    assert batch["row"].is_unique
    assert PENDING in seen["show"].stdout and slow in seen["show"].stdout
    assert seen["page_errors"] == []
    assert PENDING in seen["page"] and "Name at least two categories" in seen["page"]
    assert f"Still being embedded: {slow}" in seen["overview"]

    final = load_verdict(run)
    assert final["pending"] == [] and final["run_finished"] and PENDING not in final["text"]
    assert not final["headline"].startswith(("So far", "While the run"))
    assert slow in [row["model"] for row in final["ranking"]], "the slow candidate joins the final answer"
