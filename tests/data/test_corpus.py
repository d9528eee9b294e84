"""Tests for flare_core.data.corpus: formats, encodings, column detection, rejections and the content hash."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flare_core.data.columns import detect_columns
from flare_core.data.corpus import MAX_TEXT_CHARS, Corpus, corpus_summary, load_corpus
from flare_core.data.reading import read_table
from flare_core.errors import CorpusError
from tests.support import write

TEXTS = [
    "The cat sat on the mat.",
    "Stocks fell sharply today.",
    "A new phone was released.",
    "Rain tomorrow.",
]
LABELS = ["pets", "finance", "tech", "weather"]


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"text": TEXTS, "label": LABELS})


def _listing(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*"))


# ------------------------------------------------------------------------------------------ formats


@pytest.mark.parametrize(
    ("delimiter", "suffix"), [(",", ".csv"), (";", ".csv"), ("\t", ".tsv"), ("|", ".txt")]
)
def test_delimiters_are_sniffed(tmp_path: Path, delimiter: str, suffix: str) -> None:
    frame = pd.DataFrame(
        {"text": ["hello, world; and | more", "second text, here", "third"], "label": list("abc")}
    )
    path = tmp_path / f"data{suffix}"
    frame.to_csv(path, sep=delimiter, index=False)
    corpus = load_corpus(path)
    assert corpus.texts == frame["text"].tolist()
    assert corpus.stats["delimiter"] == delimiter
    assert corpus.stats["format"] == ("tsv" if delimiter == "\t" else "csv")


def test_tab_delimiter_sniffed_from_bytes_without_name() -> None:
    corpus = load_corpus(b"text\tlabel\nfirst, with commas\ta\nsecond; semicolons\tb\n")
    assert corpus.stats["delimiter"] == "\t"
    assert corpus.texts == ["first, with commas", "second; semicolons"]


def test_one_column_file_is_fine(tmp_path: Path) -> None:
    path = write(tmp_path / "one.csv", "text\nhello, world\nsecond; line\nthird\n")
    corpus = load_corpus(path)
    assert corpus.texts == ["hello, world", "second; line", "third"]
    assert corpus.labels is None and corpus.label_column is None
    assert corpus.stats["delimiter"] is None


def test_parquet_and_jsonl_loading(tmp_path: Path) -> None:
    frame = _frame()
    parquet = tmp_path / "data.parquet"
    frame.to_parquet(parquet, index=False)
    jsonl = write(tmp_path / "data.jsonl", "".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    for path, fmt in ((parquet, "parquet"), (jsonl, "jsonl")):
        corpus = load_corpus(path)
        assert corpus.stats["format"] == fmt
        assert corpus.texts == TEXTS and corpus.labels == LABELS
        assert corpus.ids == [0, 1, 2, 3]


def test_format_sniffed_from_bytes(tmp_path: Path) -> None:
    buf = io.BytesIO()
    _frame().to_parquet(buf, index=False)
    assert load_corpus(buf.getvalue()).stats["format"] == "parquet"
    jsonl = "\n".join(json.dumps({"text": t}) for t in TEXTS).encode()
    assert load_corpus(jsonl).stats["format"] == "jsonl"
    assert load_corpus(io.BytesIO(b"text\nfirst\nsecond\n")).stats["format"] == "csv"


def test_jsonl_blank_lines_and_null_values() -> None:
    data = b'{"text": "one"}\n\n{"text": null}\n{"text": "two", "extra": 3}\n'
    corpus = load_corpus(data)
    assert corpus.texts == ["one", "two"]
    assert corpus.ids == [0, 2]
    assert corpus.stats["n_empty_dropped"] == 1


def test_malformed_jsonl_names_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", '{"text": "ok"}\n{"text": "fine"}\n\n{"text": broken}\n')
    with pytest.raises(CorpusError, match=r"line 4 is not valid JSON"):
        load_corpus(path)
    with pytest.raises(CorpusError, match=r"line 2 is a JSON list, not an object"):
        load_corpus(b'{"text": "ok"}\n[1, 2]\n', name="x.jsonl")


def test_json_array_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "data.json",
        json.dumps([{"text": t, "label": lab} for t, lab in zip(TEXTS, LABELS, strict=True)]),
    )
    corpus = load_corpus(path)
    assert corpus.texts == TEXTS and corpus.labels == LABELS and corpus.stats["format"] == "jsonl"


def test_file_object_and_name(tmp_path: Path) -> None:
    path = write(tmp_path / "upload.csv", "text\nalpha\nbeta\n")
    with open(path, "rb") as fh:
        corpus = load_corpus(fh)
    assert corpus.source_name == "upload.csv"
    assert load_corpus(b"text\nalpha\nbeta\n", name="mine.csv").source_name == "mine.csv"


def test_read_table_returns_raw_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", "text,n\nhello,1\n,2\n")
    frame, info = read_table(path)
    assert list(frame.columns) == ["text", "n"]
    assert frame["n"].tolist() == ["1", "2"]
    assert pd.isna(frame["text"].iloc[1])
    assert info["format"] == "csv" and info["delimiter"] == "," and info["encoding"] == "utf-8"


# ---------------------------------------------------------------------------------------- encodings


def test_utf8_bom(tmp_path: Path) -> None:
    path = write(tmp_path / "bom.csv", b"\xef\xbb\xbftext,label\ncaf\xc3\xa9,a\nna\xc3\xafve,b\n")
    corpus = load_corpus(path)
    assert corpus.text_column == "text"  # the BOM is not part of the first column name
    assert corpus.texts == ["café", "naïve"]
    assert corpus.stats["encoding"] == "utf-8-sig"
    assert corpus.stats["encoding_warning"] is None


def test_cp1252_fallback_with_warning(tmp_path: Path) -> None:
    content = "text,label\nplain ascii,a\nprice \u00a3 5 \u2013 caf\u00e9,b\n".encode("cp1252")
    offset = content.index(b"\xa3")
    corpus = load_corpus(write(tmp_path / "win.csv", content))
    assert corpus.texts[1] == "price \u00a3 5 \u2013 caf\u00e9"
    assert corpus.stats["encoding"] == "cp1252"
    warning = corpus.stats["encoding_warning"]
    assert "not valid UTF-8" in warning and "cp1252" in warning
    assert f"byte offset {offset}" in warning and "line 3" in warning


def test_latin1_fallback_when_cp1252_fails(tmp_path: Path) -> None:
    content = b"text\nbyte \x81 undefined in cp1252\nsecond\n"
    corpus = load_corpus(write(tmp_path / "l1.csv", content))
    assert corpus.stats["encoding"] == "latin-1"
    assert "latin-1" in corpus.stats["encoding_warning"]
    assert "byte offset 10" in corpus.stats["encoding_warning"]


def test_nul_bytes_rejected_with_line(tmp_path: Path) -> None:
    path = write(tmp_path / "nul.csv", b"text\nfine\nbad\x00text\n")
    with pytest.raises(CorpusError, match=r"NUL byte .* line 3"):
        load_corpus(path)


def test_utf16_rejected() -> None:
    with pytest.raises(CorpusError, match="UTF-16"):
        load_corpus("text\nhello\nworld\n".encode("utf-16"))


def test_nul_inside_parquet_text_rejected(tmp_path: Path) -> None:
    path = tmp_path / "nul.parquet"
    pd.DataFrame({"text": ["ok", "bad\x00"]}).to_parquet(path, index=False)
    with pytest.raises(CorpusError, match=r"NUL character on row 2"):
        load_corpus(path)


# ------------------------------------------------------------------------------ dropping and counts


def test_empty_nan_whitespace_dropped_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "e.csv", 'text,label\nfirst,a\n,b\n"   ",a\n"\t\n",b\nsecond,a\nthird,b\n')
    corpus = load_corpus(path)
    assert corpus.texts == ["first", "second", "third"]
    assert corpus.ids == [0, 4, 5]
    assert corpus.labels == ["a", "a", "b"]
    assert corpus.stats["n_empty_dropped"] == 3
    assert corpus.stats["n_rows_read"] == 6


def test_parquet_nan_and_none_dropped(tmp_path: Path) -> None:
    path = tmp_path / "n.parquet"
    pd.DataFrame({"text": ["a text", None, "  ", "another"]}).to_parquet(path, index=False)
    corpus = load_corpus(path)
    assert corpus.texts == ["a text", "another"] and corpus.stats["n_empty_dropped"] == 2


def test_duplicates_counted_and_optionally_dropped(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "text\nsame\nother\nsame\nsame\nlast\n")
    kept = load_corpus(path)
    assert kept.texts == ["same", "other", "same", "same", "last"]
    assert kept.stats["n_duplicates"] == 2 and kept.stats["duplicates_dropped"] is False
    dropped = load_corpus(path, drop_duplicates=True)
    assert dropped.texts == ["same", "other", "last"]
    assert dropped.ids == [0, 1, 4]
    assert dropped.stats["n_duplicates"] == 2 and dropped.stats["duplicates_dropped"] is True
    assert dropped.content_hash != kept.content_hash


def test_formula_cells_kept_verbatim(tmp_path: Path) -> None:
    formulas = ["=cmd|' /C calc'!A0", "+SUM(A1:A2)", "@import", "-2+3"]
    path = tmp_path / "f.csv"
    pd.DataFrame({"text": formulas + ["plain words"]}).to_csv(path, index=False)
    corpus = load_corpus(path)
    assert corpus.texts == formulas + ["plain words"]


def test_loading_writes_nothing(tmp_path: Path) -> None:
    csv_path = tmp_path / "a.csv"
    _frame().to_csv(csv_path, index=False)
    parquet_path = tmp_path / "a.parquet"
    _frame().to_parquet(parquet_path, index=False)
    before = _listing(tmp_path)
    load_corpus(csv_path)
    load_corpus(parquet_path, max_rows=2)
    assert _listing(tmp_path) == before


# ---------------------------------------------------------------------------------------- columns


def test_column_auto_detection_prefers_long_text_and_finds_label() -> None:
    frame = pd.DataFrame(
        {
            "id": [str(i) for i in range(8)],
            "title": ["short"] * 8,
            "body": [f"a much longer body of text number {i}" for i in range(8)],
            "topic": ["x", "y"] * 4,
        }
    )
    assert detect_columns(frame) == {"text": "body", "label": "topic", "pairs": None}


def test_detection_name_preference_and_low_cardinality_label() -> None:
    frame = pd.DataFrame(
        {
            "url": [f"https://example.com/very/long/path/to/article/{i}" for i in range(10)],
            "text": [f"short text {i}" for i in range(10)],
            "group": ["g1", "g2", "g3"] * 3 + ["g1"],
            "rating": [f"{i / 7:.3f}" for i in range(10)],
        }
    )
    found = detect_columns(frame)
    assert found["text"] == "text"
    assert found["label"] == "group"


def test_detection_of_pairs(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv"
    pd.DataFrame(
        {
            "sentence1": ["a dog runs", "a man eats", "it rains"],
            "sentence2": ["a dog sprints", "food", ""],
            "score": [4.5, 1.0, 0.2],
        }
    ).to_csv(path, index=False)
    corpus = load_corpus(path)
    assert corpus.pairs is not None
    assert list(corpus.pairs.columns) == ["text_a", "text_b", "score"]
    assert corpus.pairs["score"].dtype == float
    assert corpus.pairs["score"].tolist() == [4.5, 1.0]
    assert corpus.stats["n_pairs_dropped"] == 1
    assert corpus.label_column is None
    without = load_corpus(path, pair_columns=None)
    assert without.pairs is None and without.stats["n_pairs_dropped"] == 0
    assert load_corpus(path, pair_columns=()).pairs is None
    explicit = load_corpus(path, text_column="sentence2", pair_columns=("sentence2", "sentence1", "score"))
    assert explicit.pairs["text_a"].tolist() == ["a dog sprints", "food"]


def test_non_numeric_pair_score_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "text_a,text_b,score\nfirst a,first b,1\nsecond a,second b,high\n")
    with pytest.raises(CorpusError, match=r"score column 'score' is not a number on row 2"):
        load_corpus(path)


def test_column_override(tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    pd.DataFrame(
        {
            "title": ["Cats", "Stocks", "Phones", "Rain"],
            "text": TEXTS,
            "label": LABELS,
            "kind": ["a", "b", "a", "b"],
        }
    ).to_csv(path, index=False)
    corpus = load_corpus(path, text_column="title", label_column="kind")
    assert corpus.texts == ["Cats", "Stocks", "Phones", "Rain"]
    assert corpus.labels == ["a", "b", "a", "b"]
    assert load_corpus(path, label_column=None).labels is None
    assert load_corpus(path, label_column="").labels is None
    assert load_corpus(path, text_column="text").label_column == "label"  # AUTO still detects the label


def test_unknown_column_lists_available(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    _frame().to_csv(path, index=False)
    with pytest.raises(
        CorpusError, match=r"text column 'body' not found; available columns: 'text', 'label'"
    ):
        load_corpus(path, text_column="body")
    with pytest.raises(CorpusError, match=r"label column 'topic' not found.*'text', 'label'"):
        load_corpus(path, label_column="topic")


def test_numeric_text_column_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "n.csv", "value,text\n1,hello\n2.5,world\n")
    with pytest.raises(CorpusError, match=r"column 'value' holds only numbers"):
        load_corpus(path, text_column="value")
    parquet = tmp_path / "n.parquet"
    pd.DataFrame({"x": [1.0, 2.0, 3.0]}).to_parquet(parquet, index=False)
    with pytest.raises(CorpusError, match=r"no text column found among 'x'"):
        load_corpus(parquet)
    with pytest.raises(CorpusError, match=r"column 'x' holds float64 values, not text"):
        load_corpus(parquet, text_column="x")


def test_missing_labels_rejected_with_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "l.csv", "text,label\none,a\ntwo,\nthree,b\nfour, \nfive,a\n")
    with pytest.raises(
        CorpusError,
        match=r"label column 'label' is empty on 2 of 5 kept rows \(rows 2, 4\).*label_column=None",
    ):
        load_corpus(path)
    assert load_corpus(path, label_column=None).labels is None


def test_labels_are_strings(tmp_path: Path) -> None:
    path = tmp_path / "int.parquet"
    pd.DataFrame({"text": TEXTS, "label": [0, 1, 0, 1]}).to_parquet(path, index=False)
    corpus = load_corpus(path)
    assert corpus.labels == ["0", "1", "0", "1"]


# ---------------------------------------------------------------------------------------- rejections


def test_oversized_path_rejected_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    with open(path, "wb") as fh:
        fh.truncate(3 * 1024**3)  # sparse: 3 GiB that would be costly to read
    with pytest.raises(CorpusError, match=r"3\.0 GiB, larger than the limit of 200\.0 MiB"):
        load_corpus(path)
    with open(path, "rb") as fh:
        with pytest.raises(CorpusError, match="larger than the limit"):
            load_corpus(fh)
        assert fh.tell() == 0  # nothing was read


def test_oversized_small_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "s.csv", "text\n" + "word\n" * 100)
    with pytest.raises(CorpusError, match=r"'s.csv' is 505 bytes, larger than the limit of 100 bytes"):
        load_corpus(path, max_bytes=100)
    with pytest.raises(CorpusError, match="larger than the limit"):
        load_corpus(io.BytesIO(path.read_bytes()), max_bytes=100)
    with pytest.raises(CorpusError, match="larger than the limit"):
        load_corpus(path.read_bytes(), max_bytes=100)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"is empty \(0 bytes\)"),
        (b"  \n\n ", r"is empty: it contains only whitespace"),
        (b"text,label\n", r"has no rows \(only a header with columns 'text', 'label'\)"),
        (b"text\nonly one\n", r"only 1 usable text\(s\) in column 'text' \(1 rows read, 0 empty dropped\)"),
        (
            b'text\nfirst\n""\n"  "\n',
            r"only 1 usable text\(s\) in column 'text' \(3 rows read, 2 empty dropped\)",
        ),
        (b"a,a\nx,y\nz,w\n", r"duplicate column names: 'a'"),
        (b"PK\x03\x04rest", r"ZIP archive"),
        (b"text,label\nfirst,a,extra\nsecond,b\n", r"more fields than the header"),
    ],
)
def test_rejections(tmp_path: Path, content: bytes, message: str) -> None:
    path = write(tmp_path / "r.csv", content)
    with pytest.raises(CorpusError, match=message):
        load_corpus(path)


def test_missing_file_and_bad_suffix(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="file not found"):
        load_corpus(tmp_path / "nope.csv")
    with pytest.raises(CorpusError, match="Excel workbooks are not supported"):
        load_corpus(b"whatever", name="sheet.xlsx")
    with pytest.raises(CorpusError, match="does not start with 'PAR1'"):
        load_corpus(b"text\na\nb\n", name="fake.parquet")
    with pytest.raises(CorpusError, match="not a readable Parquet file"):
        load_corpus(b"PAR1 garbage PAR1")


def test_min_texts(tmp_path: Path) -> None:
    path = write(tmp_path / "m.csv", "text\na\nb\nc\n")
    assert len(load_corpus(path, min_texts=3)) == 3
    with pytest.raises(CorpusError, match="at least 4 are needed"):
        load_corpus(path, min_texts=4)


# ------------------------------------------------------------------------------------ hash, sampling


def test_hash_same_across_csv_parquet_jsonl(tmp_path: Path) -> None:
    frame = _frame()
    frame.to_csv(tmp_path / "a.csv", index=False)
    frame.to_parquet(tmp_path / "a.parquet", index=False)
    write(tmp_path / "a.jsonl", "".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    frame.to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    hashes = {load_corpus(tmp_path / n).content_hash for n in ("a.csv", "a.parquet", "a.jsonl", "a.tsv")}
    assert len(hashes) == 1


def test_hash_order_and_label_sensitive(tmp_path: Path) -> None:
    frame = _frame()
    frame.to_csv(tmp_path / "a.csv", index=False)
    frame.iloc[::-1].to_csv(tmp_path / "b.csv", index=False)
    a, b = load_corpus(tmp_path / "a.csv"), load_corpus(tmp_path / "b.csv")
    assert a.content_hash != b.content_hash
    assert load_corpus(tmp_path / "a.csv", label_column=None).content_hash != a.content_hash


def test_hash_is_pinned() -> None:
    corpus = load_corpus(b"text,label\nhello world,a\ngoodbye,b\n")
    assert corpus.content_hash == "7befca6e147a5cd0534b812ae1158d3479426d31ce53ebef1742d3cbf5e01ddf"
    unlabeled = load_corpus(b"text\nhello world\ngoodbye\n")
    assert unlabeled.content_hash == "df183a30813afb5adf33986c50eb4d5c91b2ae1f428df74c85e3c612ef53c292"


def test_max_rows_sampling_is_seeded_and_keeps_order(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    pd.DataFrame({"text": [f"text number {i}" for i in range(200)]}).to_csv(path, index=False)
    a = load_corpus(path, max_rows=50, seed=1)
    b = load_corpus(path, max_rows=50, seed=1)
    c = load_corpus(path, max_rows=50, seed=2)
    assert a.ids == b.ids and a.content_hash == b.content_hash
    assert a.ids != c.ids
    assert a.ids == sorted(a.ids) and len(set(a.ids)) == 50
    assert a.texts == [f"text number {i}" for i in a.ids]
    assert a.stats["n_sampled_out"] == 150
    assert load_corpus(path, max_rows=500).stats["n_sampled_out"] == 0
    with pytest.raises(CorpusError, match="max_rows must be a positive integer"):
        load_corpus(path, max_rows=0)


def test_corpus_frame_and_summary() -> None:
    corpus = load_corpus(b"text,label\none two three,a\nfour five,b\nsix,a\nsix,a\n")
    assert isinstance(corpus, Corpus) and len(corpus) == 4
    frame = corpus.to_frame()
    assert list(frame.columns) == ["id", "text", "label"] and frame["id"].tolist() == [0, 1, 2, 3]
    summary = corpus_summary(corpus)
    assert summary["n_texts"] == 4 and summary["n_labels"] == 2
    assert summary["label_counts"] == {"a": 3, "b": 1}
    assert summary["max_words"] == 3 and summary["median_words"] == 1.5
    assert summary["max_chars"] == len("one two three")
    assert summary["mean_chars"] == pytest.approx((13 + 9 + 3 + 3) / 4)


def test_a_10_mb_text_is_cut_to_the_limit_and_counted(tmp_path: Path) -> None:
    """One 10 MB cell: the corpus keeps its first MAX_TEXT_CHARS characters, says so, and equals (hash
    included) the corpus of a file whose cell was cut by hand; the other texts are untouched."""
    huge = ("word " * (2 * 1024**2))[: 10 * 1024**2]
    pd.DataFrame({"text": [huge, *TEXTS[1:]], "label": LABELS}).to_csv(tmp_path / "long.csv", index=False)
    corpus = load_corpus(tmp_path / "long.csv")
    assert [len(t) for t in corpus.texts] == [MAX_TEXT_CHARS, *map(len, TEXTS[1:])]
    assert corpus.texts[0] == huge[:MAX_TEXT_CHARS] and corpus.texts[1:] == TEXTS[1:]
    assert corpus.stats["n_truncated"] == 1 and corpus.stats["max_text_chars"] == MAX_TEXT_CHARS
    assert corpus.stats["truncation_note"].startswith(
        f"1 of 4 texts longer than {MAX_TEXT_CHARS:,} characters was cut"
    )
    assert corpus_summary(corpus)["n_truncated"] == 1
    by_hand = pd.DataFrame({"text": [huge[:MAX_TEXT_CHARS], *TEXTS[1:]], "label": LABELS})
    by_hand.to_csv(tmp_path / "cut.csv", index=False)
    reference = load_corpus(tmp_path / "cut.csv")
    assert reference.stats["n_truncated"] == 0 and reference.stats["truncation_note"] is None
    assert corpus.content_hash == reference.content_hash and corpus.texts == reference.texts


@pytest.mark.parametrize(("limit", "cut"), [(None, 0), (14, 0), (13, 1), (5, 3)])
def test_texts_are_cut_only_beyond_the_limit(limit: int | None, cut: int) -> None:
    content = b"text,label\none two three,a\nfour five,b\nsix,a\n" + b"x" * 14 + b",b\n"
    corpus = load_corpus(content, max_text_chars=limit)
    original = ["one two three", "four five", "six", "x" * 14]
    assert corpus.texts == [t if limit is None else t[:limit] for t in original]
    assert corpus.stats["n_truncated"] == cut
    assert (corpus.stats["truncation_note"] is None) == (cut == 0)


def test_pair_texts_are_cut_and_counted_apart() -> None:
    content = b"text,sentence1,sentence2,score\nabcdefgh,abcdefgh,ab,1.5\nab,abc,abcdefgh,2.0\n"
    corpus = load_corpus(content, label_column=None, max_text_chars=4)
    assert corpus.texts == ["abcd", "ab"]
    assert corpus.pairs["text_a"].tolist() == ["abcd", "abc"] and corpus.pairs["text_b"].tolist() == [
        "ab",
        "abcd",
    ]
    assert (corpus.stats["n_truncated"], corpus.stats["n_pair_texts_truncated"]) == (1, 2)
    assert corpus.stats["truncation_note"].startswith(
        "1 of 2 texts and 2 pair texts longer than 4 characters were"
    )


def test_max_text_chars_is_checked() -> None:
    with pytest.raises(CorpusError, match="max_text_chars"):
        load_corpus(b"text\na\nb\n", max_text_chars=0)


# ------------------------------------------------------------------------------------------- fuzzing

_CSV_ALPHABET = st.sampled_from(list("abc xyz,;|\t\"'\n\r=+-0123456789{}[]:\\é£\x00\x81"))


def test_fuzzed_bytes_give_a_corpus_or_an_error_that_names_the_input() -> None:
    """Whatever the bytes, the loader returns a valid corpus or a CorpusError whose message starts with the
    input's name; over the (derandomised) examples both outcomes occur."""
    outcomes = {"accepted": 0, "refused": 0}

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        data=st.one_of(
            st.binary(max_size=300),
            st.text(_CSV_ALPHABET, max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass")),
            st.text(_CSV_ALPHABET, max_size=300).map(
                lambda s: ("text,label\n" + s).encode("cp1252", "replace")
            ),
            st.lists(
                st.dictionaries(
                    st.sampled_from(["text", "label", "x"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=20)),
                ),
                max_size=5,
            ).map(lambda rows: "\n".join(json.dumps(r) for r in rows).encode()),
        )
    )
    def check(data: bytes) -> None:
        try:
            corpus = load_corpus(data, min_texts=1)
        except CorpusError as exc:
            assert str(exc).startswith("'<uploaded bytes>'"), str(exc)
            outcomes["refused"] += 1
            return
        outcomes["accepted"] += 1
        assert isinstance(corpus, Corpus)
        assert len(corpus.texts) == len(corpus.ids) >= 1
        assert all(isinstance(t, str) and t.strip() for t in corpus.texts)
        assert len(corpus.content_hash) == 64

    check()
    assert outcomes["accepted"] >= 5 and outcomes["refused"] >= 5, outcomes


_WORD = st.text(st.sampled_from("abcdefghij é"), min_size=1, max_size=12).filter(lambda w: w.strip())


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.lists(_WORD, min_size=1, max_size=6).map(" ".join), st.sampled_from(["sport", "news"])),
        min_size=2,
        max_size=30,
    ).filter(lambda rows: len({" ".join(text.split()) for text, _ in rows}) >= 2),
    fmt=st.sampled_from(["csv", "tsv", "jsonl", "parquet"]),
)
def test_well_formed_tables_are_accepted_with_every_text_and_label(rows, fmt) -> None:
    """A table of non-blank word texts (two different ones at least) and labels, in any supported format,
    loads row for row."""
    texts = [" ".join(text.split()) for text, _ in rows]  # no leading, trailing or doubled spaces
    labels = [label for _, label in rows]
    frame = pd.DataFrame({"text": texts, "label": labels})
    if fmt == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    elif fmt == "jsonl":
        data = "\n".join(json.dumps(r, ensure_ascii=False) for r in frame.to_dict("records")).encode()
    else:
        data = frame.to_csv(index=False, sep="\t" if fmt == "tsv" else ",").encode()
    corpus = load_corpus(data, name=f"upload.{fmt}", text_column="text", label_column="label")
    assert corpus.texts == texts and corpus.labels == labels
    assert corpus.ids == list(range(len(rows))) and corpus.stats["n_duplicates"] == len(texts) - len(
        set(texts)
    )


def test_a_table_of_one_text_repeated_is_refused_with_the_text_named() -> None:
    data = pd.DataFrame({"text": ["same words"] * 5, "label": ["a", "b"] * 2 + ["a"]}).to_csv(index=False)
    with pytest.raises(
        CorpusError, match=r"every one of the 5 texts in column 'text' is the same text \('same words'\)"
    ):
        load_corpus(data.encode(), name="upload.csv", text_column="text", label_column="label")
    two = pd.DataFrame({"text": ["one", "two", "one"]}).to_csv(index=False)
    assert load_corpus(two.encode(), name="upload.csv", text_column="text").texts == ["one", "two", "one"]
