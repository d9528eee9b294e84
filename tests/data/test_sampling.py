"""Sampling a large delimited file in chunks: the same corpus as reading it whole, or a fallback to that."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from flare_core.data import sampling
from flare_core.data.corpus import corpus_from_table, load_corpus
from flare_core.data.reading import read_table
from flare_core.errors import CorpusError


@pytest.fixture
def small_chunks(monkeypatch):
    """Every file streams, 7 rows at a time (so a 100-row file spans 15 chunks)."""
    monkeypatch.setattr(sampling, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(sampling, "CHUNK_ROWS", 7)


def _write(path: Path, rows: list[dict], sep: str = ",") -> Path:
    pd.DataFrame(rows).to_csv(path, index=False, sep=sep)
    return path


def _rows(n: int = 100) -> list[dict]:
    rows = []
    for i in range(n):
        text = f'review {i % 37}, with "quotes",\nand a second line' if i % 5 else f"plain {i}"
        rows.append({"id": i, "text": "" if i % 11 == 0 else text, "label": f"c{i % 3}", "extra": i * 2})
    return rows


def _in_memory(path: Path, **options):
    frame, info = read_table(path)
    return corpus_from_table(frame, info, **options)


def _same(a, b) -> None:
    assert a.texts == b.texts and a.ids == b.ids and a.labels == b.labels
    assert a.content_hash == b.content_hash and a.stats == b.stats
    assert (a.text_column, a.label_column, a.source_name) == (b.text_column, b.label_column, b.source_name)
    if a.pairs is None:
        assert b.pairs is None
    else:
        pd.testing.assert_frame_equal(a.pairs, b.pairs)


@pytest.mark.parametrize("drop_duplicates", [False, True])
@pytest.mark.parametrize("seed", [0, 3])
def test_the_streamed_sample_is_the_in_memory_one(tmp_path, small_chunks, drop_duplicates, seed):
    path = _write(tmp_path / "c.csv", _rows())
    options = {"drop_duplicates": drop_duplicates, "seed": seed}
    assert sampling.sample_large_file(path, max_rows=20, max_bytes=2**30, **options) is not None  # it streams
    streamed = load_corpus(path, max_rows=20, **options)
    _same(streamed, _in_memory(path, max_rows=20, **options))
    assert streamed.stats["n_rows_read"] == 100 and streamed.stats["n_empty_dropped"] == 10
    assert streamed.stats["n_duplicates"] > 0 and len(streamed) == 20


def test_tabs_pairs_and_load_corpus(tmp_path, small_chunks):
    rows = [{"text_a": f"first {i}", "text_b": f"second {i % 9}", "score": str(i % 5)} for i in range(60)]
    path = _write(tmp_path / "p.tsv", rows, sep="\t")
    streamed = load_corpus(path, max_rows=15, text_column="text_a")
    assert streamed.pairs is not None and len(streamed.pairs) == 15
    _same(streamed, _in_memory(path, max_rows=15, text_column="text_a"))
    assert streamed.stats["delimiter"] == "\t"


def test_one_column_files_stream_too(tmp_path, small_chunks):
    path = tmp_path / "one.csv"
    path.write_text("text\n" + "".join(f"line number {i}\n" for i in range(50)), encoding="utf-8")
    assert sampling.sample_large_file(path, max_rows=5, max_bytes=2**30) is not None
    _same(load_corpus(path, max_rows=5), _in_memory(path, max_rows=5))


@pytest.mark.parametrize(
    "content, message",
    [
        ("text,label\n" + "".join(f"caf\xe9 {i},a\n" for i in range(40)), None),  # cp1252: read whole
        (
            "text,label\n" + "".join(f"t {i},a\n" for i in range(40)) + "x,a,extra\n",
            "Expected 2 fields in line 42, saw 3",
        ),
        (
            "text,label\n" + "".join(f"t {i},\n" for i in range(40)),
            "label column 'label' is empty on 40 of 40 kept rows",
        ),
    ],
)
def test_files_it_cannot_treat_exactly_are_read_whole(tmp_path, small_chunks, content, message):
    path = tmp_path / "odd.csv"
    path.write_bytes(content.encode("cp1252"))
    assert sampling.sample_large_file(path, max_rows=5, max_bytes=2**30, label_column="label") is None
    if message is None:
        corpus = load_corpus(path, max_rows=5, label_column="label")
        assert corpus.stats["encoding"] == "cp1252" and len(corpus) == 5
    else:
        with pytest.raises(CorpusError, match=message):
            load_corpus(path, max_rows=5, label_column="label")


def test_an_empty_label_outside_the_sample_is_refused_as_when_read_whole(tmp_path, small_chunks):
    rows = [{"text": f"text {i}", "label": "" if i == 77 else "a"} for i in range(100)]
    path = _write(tmp_path / "c.csv", rows)
    with pytest.raises(CorpusError, match="label column 'label' is empty on 1 of 100 kept rows .row 78."):
        load_corpus(path, max_rows=5, label_column="label", seed=0)


def test_small_files_and_the_size_limit(tmp_path, monkeypatch):
    path = _write(tmp_path / "c.csv", _rows())
    assert sampling.sample_large_file(path, max_rows=5, max_bytes=2**30) is None  # under 16 MiB: whole
    monkeypatch.setattr(sampling, "STREAM_MIN_BYTES", 0)
    with pytest.raises(CorpusError, match="larger than the limit"):
        sampling.sample_large_file(path, max_rows=5, max_bytes=100)
    streamed = load_corpus(path, max_rows=200)  # nothing to sample: read whole, as before
    assert dataclasses.asdict(streamed)["stats"]["n_sampled_out"] == 0
