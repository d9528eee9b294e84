"""Every shape of run finishes what it can: a pairwise covering sweep over the ways a run can be shaped.

Each shape is built as a person would (a CSV read by ``load_corpus``, options through ``build_params``,
``create_run``) and computed by the real pipeline (``jobs.run_in_process``), with a tiny random-init BERT
saved as a local model folder, the static models of the offline pool and embeddings files. Every shape
must end ``done`` with every stage done or skipped for a stated reason, or be refused before any work with
a specific message. Each shape is a test of its own, named by its levels.

The dimensions (issue: "every run finishes what it can"): candidates 1/2/3; controls none or the default;
labels none/one class/two/many classes of one text each; scored pairs; 3, 10 or 50 texts; the texts as
they are, one text repeated, or nothing left after cleaning; models, embeddings files only, or a mix;
estimator flow/gmm/both; collapse on/off. A greedy pairwise covering array (seeded) picks the shapes:
every pair of levels of two dimensions appears in at least one shape.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flare_core.answer.costs import run_costs
from flare_core.answer.stored import load_verdict
from flare_core.data.corpus import load_corpus
from flare_core.data.demo import bbc_news_frame
from flare_core.encoders import random_init_transformer
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.outcomes import problems
from flare_core.run.params import build_params
from flare_core.store.runs import RunStore

DIMENSIONS = {
    "candidates": (1, 2, 3),
    "controls": ("none", "default"),
    "labels": ("none", "two", "three"),
    "pairs": ("no", "scored"),
    "texts": (3, 10, 50),
    "sources": ("models", "files only", "mixed"),
    "estimator": ("flow", "gmm", "both"),
    "collapse": ("on", "off"),
}
#: Levels the product must refuse before any work, each tried alone on an otherwise ordinary shape (the
#: "invalid values" of combinatorial testing: combined, the first would hide the others).
REFUSED = {
    "labels": ("one class", "one text each"),
    "corpus": ("one text repeated", "empty after cleaning"),
}
ORDINARY = {"candidates": 2, "controls": "none", "labels": "two", "pairs": "no", "texts": 10,
            "sources": "models", "estimator": "gmm", "collapse": "off", "corpus": "as is"}  # fmt: skip
#: Characters kept of each article: how many texts a shape has is a dimension, their length is not, and a
#: transformer's work (the default controls, collapse) grows with it.
SHORT = 300
TINY_BERT = {
    "model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128,
}  # fmt: skip


def covering_shapes(dimensions: dict[str, tuple], seed: int = 0, tries: int = 60) -> list[dict]:
    """A greedy pairwise covering array: shapes added one at a time, each the best of ``tries`` seeded
    random shapes at covering pairs of levels not covered yet, until every pair is covered."""
    names = list(dimensions)
    uncovered = {
        (a, x, b, y)
        for a, b in itertools.combinations(names, 2)
        for x in dimensions[a]
        for y in dimensions[b]
    }
    rng = random.Random(seed)
    shapes = []
    while uncovered:
        best, gain = None, -1
        for _ in range(tries):
            shape = {n: rng.choice(dimensions[n]) for n in names}
            a, x, b, y = next(iter(sorted(uncovered, key=str)))  # always able to cover one pair
            shape[a], shape[b] = x, y
            covers = sum((a, shape[a], b, shape[b]) in uncovered for a, b in itertools.combinations(names, 2))
            if covers > gain:
                best, gain = shape, covers
        uncovered -= {(a, best[a], b, best[b]) for a, b in itertools.combinations(names, 2)}
        shapes.append(best)
    return shapes


def all_shapes() -> list[dict]:
    """The covering array of the valid levels (as-is corpus), then one shape per refused level."""
    shapes = [{**shape, "corpus": "as is"} for shape in covering_shapes(DIMENSIONS)]
    for dimension, levels in REFUSED.items():
        shapes += [{**ORDINARY, dimension: level} for level in levels]
    return shapes


def test_the_covering_array_covers_every_pair():
    shapes = covering_shapes(DIMENSIONS)
    for a, b in itertools.combinations(DIMENSIONS, 2):
        seen = {(s[a], s[b]) for s in shapes}
        assert seen == set(itertools.product(DIMENSIONS[a], DIMENSIONS[b])), (a, b)
    assert len(shapes) < 25  # far fewer than the 2,916 shapes of the full product


@pytest.fixture(scope="session")
def tiny_bert_folder(tmp_path_factory) -> Path:
    """A random-init BERT saved as a local model folder (a model id like any other)."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    encoder = random_init_transformer(dict(TINY_BERT), seed=0, device="cpu")
    encoder.model.save_pretrained(folder)
    encoder.tokenizer.save_pretrained(folder)
    return folder


def _corpus_file(shape: dict, folder: Path) -> Path:
    n = shape["texts"]
    texts = bbc_news_frame(n_per_topic=10, seed=0)["text"].str[:SHORT].head(n).tolist()
    if shape["corpus"] == "one text repeated":
        texts = [texts[0]] * n
    elif shape["corpus"] == "empty after cleaning":
        texts = ["   ", "\t", ""] * n
        texts = texts[:n]
    frame = pd.DataFrame({"text": texts})
    labels = {
        "one class": ["news"] * n,
        "two": ["a", "b"] * (n // 2) + ["a"] * (n % 2),
        "three": (["a", "b", "c"] * n)[:n],
        "one text each": [f"class {i}" for i in range(n)],
    }.get(shape["labels"])
    if labels is not None:
        frame["label"] = labels
    if shape["pairs"] == "scored":
        order = np.random.default_rng(0).permutation(n)
        frame["text_a"], frame["text_b"] = texts, [texts[i] for i in order]
        frame["score"] = np.linspace(0.0, 5.0, n)
    path = folder / "corpus.csv"
    frame.to_csv(path, index=False)
    return path


def _models(shape: dict, tiny: Path, n_rows: int) -> tuple[list[str], dict[str, np.ndarray]]:
    pool = [str(tiny), "glove-6b-50d", "tokenlearn-static-64d"]
    k = shape["candidates"]
    rng = np.random.default_rng(k)
    files = {f"file-{i}": rng.normal(size=(n_rows, 8 + 4 * i)).astype(np.float32) for i in range(k)}
    if shape["sources"] == "models":
        return pool[:k], {}
    if shape["sources"] == "files only":
        return [], files
    return pool[: k - 1], dict(list(files.items())[: max(1, k - (k - 1))])  # mixed: models and one file


def _compute(shape: dict, tiny: Path, folder: Path) -> dict:
    started = time.perf_counter()
    try:
        corpus = load_corpus(
            _corpus_file(shape, folder),
            text_column="text",
            label_column=None if shape["labels"] == "none" else "label",
            pair_columns=("text_a", "text_b", "score") if shape["pairs"] == "scored" else None,
        )
        models, files = _models(shape, tiny, len(corpus))
        params = build_params(
            models=models, estimator=shape["estimator"], controls=[] if shape["controls"] == "none" else None,
            collapse=shape["collapse"] == "on", flow_preset="fast", validation_repeats=3, collapse_texts=8,
            concentration_texts=4, map_points=100,
        )  # fmt: skip
        run = create_run(RunStore(folder / "runs"), corpus, params, precomputed=files)
    except ValueError as exc:  # refused before any work (CorpusError is a ValueError)
        return {
            "outcome": "refused before start",
            "detail": str(exc),
            "seconds": time.perf_counter() - started,
        }
    status = jobs.run_in_process(run)
    after_labels = _label_a_few(run) if status == "done" and shape["labels"] == "none" else ""
    manifest = run.manifest
    skipped = sorted(n for n, o in (manifest.get("outcomes") or {}).items() if o.get("status") == "skipped")
    return {
        "outcome": status,
        "detail": manifest.get("error") or "; ".join(f"{p['stage']}: {p['why']}" for p in problems(manifest)),
        "skipped": ", ".join(skipped),
        "verdict": (load_verdict(run) or {}).get("headline", ""),
        "seconds": time.perf_counter() - started,
        "problems": problems(manifest),
        "after labels": after_labels,
    }


def _label_a_few(run) -> str:
    """Labels added to a finished run without labels (two categories, up to four texts), then its answer
    again: the ground the answer then stands on."""
    from flare_core.answer.labels import add_labels
    from flare_core.answer.write import write_verdict

    n = int(run.manifest["corpus"]["n_texts"])
    add_labels(run, {row: ("a", "b")[row % 2] for row in range(min(4, n))})
    return write_verdict(run)["basis"]


def _shape_id(shape: dict) -> str:
    return "-".join(str(shape[name]).replace(" ", "_") for name in [*DIMENSIONS, "corpus"])


#: Why each refused level is refused, in the words of its message.
REFUSED_WORDS = {"one class": "one class only", "one text each": "looks like an identifier",
                 "one text repeated": "the same text", "empty after cleaning": "usable text"}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("shape", all_shapes(), ids=_shape_id)
def test_every_run_shape_ends_done_or_is_refused_before_work(shape, tiny_bert_folder, tmp_path):
    row = {**shape, **_compute(shape, tiny_bert_folder, tmp_path)}
    refused_level = next((shape[d] for d, levels in REFUSED.items() if shape.get(d) in levels), None)
    if refused_level is not None:  # each refused level is refused for its own reason, in a sentence
        assert row["outcome"] == "refused before start", row
        assert REFUSED_WORDS[refused_level] in row["detail"] and len(row["detail"]) > 30, row["detail"]
        return
    if shape["labels"] != "none" and shape["texts"] == 3:
        # with 3 texts, 2 or 3 classes leave a class with one text, which the supervised check cannot test
        assert "with 2 or more texts" in row["detail"], row
        if row["outcome"] == "refused before start":
            assert len(row["detail"]) > 30
            return
    assert row["outcome"] == "done", row
    assert not row["problems"], row["detail"]
    assert len(row["verdict"]) > 0  # every finished run says something in words
    if shape["labels"] == "none":  # labels added to it: its answer is rebuilt on them where there is a choice
        assert row["after labels"] == ("few labels" if shape["candidates"] > 1 else "unranked"), row


@pytest.mark.slow
def test_one_model_run_from_the_command_line_ends_done_with_its_collapse_and_layers(tmp_path):
    """The regression of the issue: ``flare run corpus.csv --models all-MiniLM-L6-v2`` (default controls), run
    as a process; what reads the run (``show``, ``collapse``) runs in this process."""
    from tests.support import flare, flare_here

    frame = bbc_news_frame(n_per_topic=4, seed=0)[["text", "label"]]
    frame["text"] = frame["text"].str[:SHORT]
    frame.to_csv(tmp_path / "corpus.csv", index=False)
    runs = tmp_path / "runs"
    args = ("--collapse-texts", "6", "--flow-preset", "fast")
    done = flare("run", str(tmp_path / "corpus.csv"), "--models", "all-MiniLM-L6-v2", *args, runs_dir=runs)
    run_id = done.stdout.strip().splitlines()[-1]
    shown = json.loads(flare_here("show", run_id, "--json", runs_dir=runs).stdout)
    assert shown["status_words"] == "done" and shown["problems"] == []
    verdict = shown["verdict"]
    assert verdict["recommended"] is None and verdict["ranking"] == []
    assert verdict["headline"] == "Only one candidate, all-MiniLM-L6-v2: there is nothing to rank it against."
    assert "accuracy" in verdict["summary"] and "collapse" in verdict["summary"]
    assert [row["model"] for row in shown["collapse"]] == ["all-MiniLM-L6-v2"]
    assert {row["model"] for row in shown["concentration"]} == {"all-MiniLM-L6-v2"}
    collapse = json.loads(
        flare_here("collapse", run_id, "--model", "all-MiniLM-L6-v2", "--json", runs_dir=runs).stdout
    )
    assert 0 < collapse["summary"][0]["socm_mean"] < 1
    assert len(collapse["layers"]) == 6  # one row per layer of MiniLM
    # its cost is measured like any run's, and a budget it does not fit says so
    costs = run_costs(RunStore(runs).get(run_id))
    assert costs["model"].tolist() == ["all-MiniLM-L6-v2"] and costs["texts_per_s"].iloc[0] > 0
    assert (
        costs["bytes_per_vector_float32"].iloc[0] == 384 * 4 and costs["bytes_per_vector_int8"].iloc[0] == 384
    )
    assert verdict.get("cost") is None  # no cheaper model to name
    budget = flare_here("show", run_id, "--max-width", "100", runs_dir=runs).stdout
    assert "No model of this run fits the budget" in budget
    assert "outside the budget: all-MiniLM-L6-v2 (384 dimensions, more than 100)" in budget
