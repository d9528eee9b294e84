"""Checks of the New run form's fields on real files on disk, against what the run itself does with them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flare_core.choosing.downstream import classification
from flare_core.data.corpus import load_corpus
from flare_core.data.reading import read_table
from flare_core.encoders import load_precomputed
from flare_core.errors import CorpusError
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.run.precheck import (
    check_embedding_names,
    check_labels_for_run,
    precheck_corpus,
    precheck_embeddings,
    precheck_model_ids,
)
from flare_core.store.runs import RunStore

TEXTS = [f"text number {i} about {topic}" for i, topic in enumerate(["cats", "dogs", "birds"] * 4)]


def _table(tmp_path, frame: pd.DataFrame, name: str = "corpus.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path, *read_table(path, max_bytes=10**7)


def test_numbers_only_text_column_is_refused_with_the_run_loaders_message(tmp_path):
    path, frame, info = _table(tmp_path, pd.DataFrame({"value": [str(i * 1.5) for i in range(12)]}))
    check = precheck_corpus(frame, info, text_column="value")
    assert check.blocks and check.text.level == "error" and check.corpus is None
    assert "holds only numbers, not text" in check.text.message
    with pytest.raises(CorpusError) as refused:
        load_corpus(path, text_column="value", label_column=None, pair_columns=None)
    assert str(refused.value) == check.text.message


def test_good_corpus_gives_the_corpus_the_run_would_load(tmp_path):
    texts = [*TEXTS[:5], "", *TEXTS[5:], "   "]
    labels = ["a", "b", "c", "a", "b", "x", "c", "a", "b", "c", "a", "b", "c", "y"]
    path, frame, info = _table(tmp_path, pd.DataFrame({"text": texts, "label": labels}))
    check = precheck_corpus(frame, info, text_column="text", label_column="label")
    assert not check.blocks
    assert check.text.message == "12 texts to analyse (2 empty rows skipped)"
    assert check.label == check_labels_for_run(["a", "b", "c"] * 4, column="label")
    assert check.label.message == "3 classes, 4 to 4 texts each"
    loaded = load_corpus(path, text_column="text", label_column="label", pair_columns=None)
    assert check.corpus.content_hash == loaded.content_hash and len(check.corpus) == 12


def test_sample_size_sets_the_corpus_length(tmp_path):
    path, frame, info = _table(tmp_path, pd.DataFrame({"text": TEXTS}))
    check = precheck_corpus(frame, info, text_column="text", max_rows=5, seed=3)
    assert len(check.corpus) == 5 and "a seeded sample of 5 of 12" in check.text.message
    loaded = load_corpus(path, text_column="text", label_column=None, pair_columns=None, max_rows=5, seed=3)
    assert check.corpus.texts == loaded.texts


@pytest.mark.parametrize(
    ("labels", "level", "words"),
    [
        (["same"] * 12, "error", "one class only ('same' on all 12 texts)"),
        ([f"id{i}" for i in range(12)], "error", "12 classes for 12 texts but only 0 with 2 or more"),
        (["a", "a"] + [f"id{i}" for i in range(10)], "error", "11 classes for 12 texts but only 1 with"),
        (["a", "a", "b", "b"] + [f"id{i}" for i in range(8)], "warning", "10 classes for 12 texts"),
        (["a"] * 5 + ["b"] * 6 + ["lonely"], "warning", "1 with a single text ('lonely')"),
        (["a"] * 5 + ["b"] * 7, "ok", "2 classes, 5 to 7 texts each"),
    ],
)
def test_label_sanity_agrees_with_the_supervised_check(labels, level, words):
    check = check_labels_for_run(labels, column="label")
    assert check.level == level and words in check.message, check.message
    x = np.random.default_rng(0).normal(size=(len(labels), 3))
    if level == "error":
        with pytest.raises(ValueError, match="at least 2 classes"):
            classification(x, labels)
    else:
        assert classification(x, labels)["n_classes"] >= 2


def test_label_column_problems_from_the_loader_are_shown_on_the_label_field(tmp_path):
    labels = ["a", "b"] * 5 + ["", "a"]
    _, frame, info = _table(tmp_path, pd.DataFrame({"text": TEXTS, "label": labels}))
    check = precheck_corpus(frame, info, text_column="text", label_column="label")
    assert check.text.level == "ok" and check.label.level == "error" and check.blocks
    assert "label column 'label' is empty on 1 of 12 kept rows (row 11)" in check.label.message
    same = precheck_corpus(frame, info, text_column="text", label_column="text")
    assert "also the text column" in same.label.message


def _npy(tmp_path, name: str, array: np.ndarray, **kwargs) -> bytes:
    path = tmp_path / name
    np.save(path, array, **kwargs)
    return path.read_bytes()


def test_npy_rows_are_checked_against_the_corpus(tmp_path):
    data = _npy(tmp_path, "a.npy", np.arange(48, dtype=np.float64).reshape(12, 4))
    ok, array = precheck_embeddings(data, name="a", n_rows=12)
    assert ok.level == "ok" and ok.message == "12 rows × 4 dimensions" and array.dtype == np.float32
    short, none = precheck_embeddings(data, name="a", n_rows=13)
    assert short.level == "error" and none is None
    assert short.message == "a: has 12 rows but the corpus has 13 texts"
    alone, _ = precheck_embeddings(data, name="a", n_rows=None)
    assert alone.message == "12 rows × 4 dimensions"
    same, _ = precheck_embeddings(_npy(tmp_path, "c.npy", np.ones((12, 4))), name="c", n_rows=12)
    assert same.level == "error" and same.message.startswith("c: every row is the same vector")


def test_pickled_npy_is_refused_without_unpickling(tmp_path):
    data = _npy(tmp_path, "p.npy", np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    check, array = precheck_embeddings(data, name="p", n_rows=2)
    assert check.level == "error" and array is None and "pickles are never loaded" in check.message


def test_parquet_with_one_vector_column_is_read_and_others_refused(tmp_path):
    vectors = [[float(i), float(i) + 0.5, 1.0] for i in range(12)]
    pq.write_table(pa.table({"embedding": vectors}), tmp_path / "v.parquet")
    ok, array = precheck_embeddings((tmp_path / "v.parquet").read_bytes(), name="v", n_rows=12)
    assert ok.message == "12 rows × 3 dimensions" and array[3, 1] == pytest.approx(3.5)
    pq.write_table(pa.table({"e1": vectors, "e2": vectors}), tmp_path / "two.parquet")
    two, _ = precheck_embeddings((tmp_path / "two.parquet").read_bytes(), name="two", n_rows=12)
    assert two.level == "error" and "non-numeric: e1" in two.message
    ragged = [v[: 2 + i % 2] for i, v in enumerate(vectors)]
    pq.write_table(pa.table({"embedding": ragged}), tmp_path / "ragged.parquet")
    bad, _ = precheck_embeddings((tmp_path / "ragged.parquet").read_bytes(), name="ragged", n_rows=12)
    assert "rows of column 'embedding' have different lengths (2 to 3)" in bad.message


def test_an_empty_embeddings_file_is_refused_without_a_corpus(tmp_path):
    data = _npy(tmp_path, "e.npy", np.zeros((0, 3), dtype=np.float32))
    check, _ = precheck_embeddings(data, name="e", n_rows=None)
    assert check.message == "e: has no rows"
    with pytest.raises(ValueError, match="has no rows"):
        load_precomputed(data, n_rows=None, name="e")


def test_embedding_names_must_be_given_distinct_and_free():
    assert check_embedding_names([" a ", "b"], models=["glove-6b-50d"]) == ["a", "b"]
    with pytest.raises(ValueError, match="needs a name"):
        check_embedding_names(["a", "  "])
    with pytest.raises(ValueError, match="two embeddings files are named 'a'"):
        check_embedding_names(["a", "a"])
    with pytest.raises(ValueError, match="'glove-6b-50d' have the name of a model"):
        check_embedding_names(["glove-6b-50d"], models=["glove-6b-50d"])


def test_create_run_refuses_embeddings_named_like_a_control_and_writes_nothing(tmp_path, small_corpus_path):
    store = RunStore(tmp_path / "runs")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column=None)
    params = RunParams(models=[], estimators=["gmm"], controls=["shuffled-glove-6b-50d"])
    array = np.ones((len(corpus), 3), dtype=np.float32)
    with pytest.raises(ValueError, match="'shuffled-glove-6b-50d' have the name of a model of this run"):
        create_run(store, corpus, params, precomputed={"shuffled-glove-6b-50d": array})
    assert store.list() == []


def test_model_ids_typed_by_hand_are_checked_with_close_matches():
    assert precheck_model_ids(["glove-6b-50d"]).level == "ok"
    check = precheck_model_ids(["glove-6b-50d", "all-mpnet-base-v3"])
    assert check.blocks and "all-mpnet-base-v3" in check.message and "all-mpnet-base-v2" in check.message


# -- too few different texts: refused by the form's check and by the run alike, before any work -------------


@pytest.mark.parametrize(
    ("texts", "labels", "message"),
    [
        (
            ["the first text", "the second text"],
            None,
            "only 2 different texts: a run compares texts and needs at least 3",
        ),
        (
            ["a one", "a two"] * 15,
            ["a", "b"] * 15,
            "only 2 different texts (in 30 rows): a run compares texts",
        ),
    ],
)
def test_too_few_different_texts_are_refused_by_the_check_and_the_run(texts, labels, message, tmp_path):
    frame = pd.DataFrame({"text": texts} | ({} if labels is None else {"label": labels}))
    path, read, info = _table(tmp_path, frame)
    check = precheck_corpus(read, info, text_column="text", label_column=None if labels is None else "label")
    assert check.blocks and check.corpus is None and message in check.text.message
    corpus = load_corpus(
        path, text_column="text", label_column=None if labels is None else "label", pair_columns=None
    )
    store = RunStore(tmp_path / "runs")
    with pytest.raises(CorpusError, match=message.replace("(", r"\(").replace(")", r"\)")):
        create_run(store, corpus, RunParams(models=["glove-6b-50d"]))
    assert not store.root.exists() or list(store.root.iterdir()) == []


def test_three_different_texts_are_enough_for_the_check_and_the_run(tmp_path):
    path, read, info = _table(tmp_path, pd.DataFrame({"text": ["one text", "another text", "a third text"]}))
    check = precheck_corpus(read, info, text_column="text")
    assert not check.blocks and check.text.message == "3 texts to analyse"
    corpus = load_corpus(path, text_column="text", label_column=None, pair_columns=None)
    run = create_run(RunStore(tmp_path / "runs"), corpus, RunParams(models=["glove-6b-50d"]))
    assert run.manifest["corpus"]["n_texts"] == 3


def test_labelled_texts_are_counted_once_however_often_they_repeat(tmp_path):
    # 3 different texts x 10, labelled a, a, b: class b has one different text, so no supervised check
    texts, labels = ["cats purr", "cats nap", "dogs bark"] * 10, ["a", "a", "b"] * 10
    refused = check_labels_for_run(labels, column="label", texts=texts)
    assert refused.blocks
    assert "2 classes for 30 texts but only 1 with 2 or more different texts" in refused.message
    assert "27 of the 30 labelled texts repeat another text" in refused.message
    # counted by rows, as before, the same labels passed
    assert not check_labels_for_run(labels, column="label").blocks
    path, read, info = _table(tmp_path, pd.DataFrame({"text": texts, "label": labels}))
    check = precheck_corpus(read, info, text_column="text", label_column="label")
    assert check.blocks and check.label == refused
    corpus = load_corpus(path, text_column="text", label_column="label", pair_columns=None)
    with pytest.raises(CorpusError, match="only 1 with 2 or more different texts"):
        create_run(RunStore(tmp_path / "runs"), corpus, RunParams(models=["glove-6b-50d"]))


def test_repeated_labelled_texts_are_named_in_a_warning(tmp_path):
    texts = ["cats purr", "cats nap", "dogs bark", "dogs dig"] * 4
    labels = ["a", "a", "b", "b"] * 4
    check = check_labels_for_run(labels, column="label", texts=texts)
    assert check.level == "warning"
    assert check.message.startswith(
        "2 classes, 8 to 8 texts each. 12 of the 16 labelled texts repeat another"
    )
    assert "--drop-duplicates" in check.message
    assert check_labels_for_run(labels[:4], column="label", texts=texts[:4]).level == "ok"


def test_flare_run_prints_the_repeats_warning(tmp_path):
    from flare_core.run.create import corpus_notes

    texts, labels = ["cats purr", "cats nap", "dogs bark", "dogs dig"] * 4, ["a", "a", "b", "b"] * 4
    path, _, _ = _table(tmp_path, pd.DataFrame({"text": texts, "label": labels}))
    corpus = load_corpus(path, text_column="text", label_column="label", pair_columns=None)
    assert corpus_notes(corpus) == [
        f"warning: {check_labels_for_run(labels, column='label', texts=texts).message}"
    ]
    assert "12 of the 16 labelled texts repeat another text" in corpus_notes(corpus)[0]
    distinct = load_corpus(
        path, text_column="text", label_column="label", pair_columns=None, drop_duplicates=True
    )
    assert corpus_notes(distinct) == []
