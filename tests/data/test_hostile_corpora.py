"""Corpora a person might upload that try the loader: broken encodings, NUL bytes, odd headers, very
long texts, many rows, duplicates only, fuzzed column choices, and files larger than the limit."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flare_core.data.corpus import AUTO, MAX_TEXT_CHARS, Corpus, load_corpus
from flare_core.errors import CorpusError
from tests.support import write


def test_invalid_utf8_in_an_otherwise_utf8_file_loads_with_a_visible_warning(tmp_path):
    content = "text,label\ncafé au lait,a\n".encode() + b"broken \xff byte here,b\nplain,a\n"
    corpus = load_corpus(write(tmp_path / "mixed.csv", content))
    assert len(corpus) == 3
    warning = corpus.stats["encoding_warning"]
    assert warning and "not valid UTF-8" in warning and "0xFF" in warning and "line 3" in warning
    assert corpus.stats["encoding"] in ("cp1252", "latin-1")


def test_nul_byte_deep_in_a_jsonl_file_names_the_line(tmp_path):
    lines = [json.dumps({"text": f"record {i}"}) for i in range(6)]
    body = ("\r\n".join(lines[:4]) + "\r\n").encode() + b'{"text": "bad\x00"}\r\n' + lines[5].encode()
    with pytest.raises(CorpusError, match=r"NUL byte \(0x00\) at line 5"):
        load_corpus(write(tmp_path / "nul.jsonl", body))


def test_one_column_file_with_an_unusual_header_and_quoted_commas(tmp_path):
    path = write(tmp_path / "one.csv", 'notes\n"a, b, c"\n"x; y | z"\nplain\n')
    corpus = load_corpus(path)
    assert corpus.text_column == "notes"
    assert corpus.texts == ["a, b, c", "x; y | z", "plain"]
    assert corpus.labels is None


def test_hundred_thousand_character_texts_load_and_embed_with_glove(tmp_path):
    from flare_core import encoders

    words = ["market", "economy", "football", "election", "film"]
    texts = [
        (" ".join([w] * 30_000))[: MAX_TEXT_CHARS - 1].strip() + "." for w in words
    ]  # at the limit: whole
    path = tmp_path / "long.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    corpus = load_corpus(path)
    assert all(len(t) >= 99_990 for t in corpus.texts)
    assert corpus.texts == texts
    encoder = encoders.load_encoder("glove-6b-50d")  # bench/speed/corpus_load.py times this
    emb = encoders.embed(encoder, corpus.texts, corpus_hash=corpus.content_hash, cache_dir=None)
    assert emb.shape == (5, 50) and emb.dtype == np.float32 and np.isfinite(emb).all()
    assert np.linalg.matrix_rank(emb) == 5  # five different words, five different vectors


_BIG_LOAD = """
import json, resource, sys
from flare_core.data.corpus import load_corpus
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
full = load_corpus(sys.argv[1], text_column="text", label_column="label")
a = load_corpus(sys.argv[1], text_column="text", label_column="label", max_rows=1000, seed=3)
b = load_corpus(sys.argv[1], text_column="text", label_column="label", max_rows=1000, seed=3)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "n": len(full), "n_sample": len(a),
    "ids": a.ids, "same": a.ids == b.ids and a.content_hash == b.content_hash,
    "texts_ok": all(t == f"row {i} about topic {i % 7} and a few more words" for i, t in zip(a.ids, a.texts)),
    "sampled_out": a.stats["n_sampled_out"], "base_mb": base / 1024, "peak_mb": peak / 1024,
}))
"""


def test_two_hundred_thousand_rows_load_in_bounded_memory_and_sample(tmp_path):
    """200,000 rows load whole and as a seeded sample (bench/speed/corpus_load.py measures how fast)."""
    n = 200_000
    path = tmp_path / "big.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("text,label\n")
        fh.writelines(f"row {i} about topic {i % 7} and a few more words,t{i % 7}\n" for i in range(n))
    proc = subprocess.run(
        [sys.executable, "-c", _BIG_LOAD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n"] == n
    assert out["n_sample"] == 1000 and out["sampled_out"] == n - 1000
    assert out["same"] and out["texts_ok"]
    assert out["ids"] == sorted(out["ids"]) and len(set(out["ids"])) == 1000
    # a 10 MB file: loading it must not cost more than a few hundred MB above the interpreter
    assert out["peak_mb"] - out["base_mb"] < 400, out


def test_a_corpus_of_only_duplicates(tmp_path):
    path = write(tmp_path / "dup.csv", "text,label\n" + "same text,a\n" * 40)
    with pytest.raises(CorpusError, match=r"every one of the 40 texts .* is the same text \('same text'\)"):
        load_corpus(path)
    with pytest.raises(CorpusError, match=r"only 1 usable text.*39 duplicates dropped.*at least 2"):
        load_corpus(path, drop_duplicates=True)


_FUZZ_FRAME = pd.DataFrame(
    {
        "text": [
            "alpha beta",
            "gamma",
            "",
            "alpha beta",
            "delta words",
            None,
            "epsilon",
            "zeta eta",
            "theta",
        ],
        "label": ["a", "b", "a", "b", None, "a", "b", "a", "b"],
        "sentence1": ["s one", "s two", "s three", None, "s five", "s six", "s seven", "s eight", "s nine"],
        "sentence2": ["t one", "t two", "t three", "t four", "t five", "t six", "t seven", "t eight", "t9"],
        "score": ["1", "2.5", "x", "3", "", "4", "5", "0", "1"],
        "num": ["1", "2", "3", "4", "5", "6", "7", "8", "9"],
        "id": [str(i) for i in range(9)],
    }
)


_COLUMNS = list(_FUZZ_FRAME.columns)


def _fuzz_bytes(fmt: str) -> bytes:
    if fmt == "csv":
        return _FUZZ_FRAME.to_csv(index=False).encode()
    if fmt == "jsonl":
        return "\n".join(
            json.dumps({k: v for k, v in row.items() if v is not None})
            for row in _FUZZ_FRAME.to_dict("records")
        ).encode()
    buffer = io.BytesIO()
    _FUZZ_FRAME.to_parquet(buffer, index=False)
    return buffer.getvalue()


_FUZZ_DATA = {fmt: _fuzz_bytes(fmt) for fmt in ("csv", "jsonl", "parquet")}


_column = st.sampled_from([*_COLUMNS, "missing", "", "TEXT"]) | st.integers(0, 3)


def _expected_refusal(text_column, max_rows, seed) -> str | None:
    """The message a choice must be refused with when its arguments alone are wrong, else None."""
    if max_rows is not None and max_rows < 1:
        return f"max_rows must be a positive integer or None, got {max_rows!r}"
    if seed < 0:
        return f"seed must be an integer >= 0, got {seed!r}"
    if text_column is not None and text_column not in _COLUMNS:
        return f"text column {text_column!r} not found; available columns: "
    return None


def test_fuzzed_column_choices_give_a_corpus_or_a_specific_corpus_error():
    """Choices wrong in themselves (a missing text column, a bad max_rows or seed) are refused with their own
    message; every other choice gives a corpus that keeps its promises or a CorpusError naming the file
    (or the malformed pair_columns); over the (derandomised) examples both outcomes occur."""
    outcomes = {"accepted": 0, "refused": 0}

    @settings(
        max_examples=120,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        fmt=st.sampled_from(sorted(_FUZZ_DATA)),
        text_column=st.none() | _column,
        label_column=st.just(AUTO) | st.none() | _column,
        pair_columns=st.just(AUTO)
        | st.none()
        | st.lists(st.sampled_from([*_COLUMNS, "missing"]), max_size=4).map(tuple),
        drop_duplicates=st.booleans(),
        max_rows=st.none() | st.integers(-1, 12),
        seed=st.integers(-1, 3),
    )
    def check(fmt, text_column, label_column, pair_columns, drop_duplicates, max_rows, seed):
        expected = _expected_refusal(text_column, max_rows, seed)
        try:
            corpus = load_corpus(
                _FUZZ_DATA[fmt],
                name=f"fuzz.{fmt}",
                text_column=text_column,
                label_column=label_column,
                pair_columns=pair_columns,
                drop_duplicates=drop_duplicates,
                max_rows=max_rows,
                seed=seed,
            )
        except CorpusError as exc:
            message = str(exc)
            if expected is not None:
                assert expected in message, (expected, message)
            else:
                assert message.startswith(f"'fuzz.{fmt}'") or message.startswith("pair_columns must name"), (
                    message
                )
            outcomes["refused"] += 1
            return
        assert expected is None, f"accepted although {expected}"
        outcomes["accepted"] += 1
        assert isinstance(corpus, Corpus)
        assert len(corpus.texts) == len(corpus.ids) >= 2
        assert corpus.ids == sorted(set(corpus.ids))
        source = _FUZZ_FRAME[corpus.text_column]
        assert corpus.texts == [str(source[i]) for i in corpus.ids]
        if max_rows is not None:
            assert len(corpus) <= max_rows
        if drop_duplicates:
            assert len(set(corpus.texts)) == len(corpus.texts)
        if corpus.labels is not None:
            assert len(corpus.labels) == len(corpus.texts) and all(corpus.labels)

    check()
    assert outcomes["accepted"] >= 5 and outcomes["refused"] >= 5, outcomes


class _CountingStream(io.RawIOBase):
    """A non-seekable stream of ``size`` bytes that counts what is read from it."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n is None or n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b"a\n" * (n // 2) + b"a" * (n % 2)


def test_max_bytes_refuses_large_inputs_before_reading_them(tmp_path, monkeypatch):
    from flare_core.data import reading

    path = tmp_path / "large.csv"
    with open(path, "wb") as fh:
        fh.write(b"text\n")
        fh.truncate(512 * 1024**2)  # sparse

    def no_open(*args, **kwargs):
        raise AssertionError("the file was opened: its size should have been refused first")

    monkeypatch.setattr(reading, "open", no_open, raising=False)  # the reader's only way to read a path
    with pytest.raises(CorpusError, match=r"512\.0 MiB, larger than the limit of 1\.0 MiB"):
        load_corpus(path, max_bytes=1024**2)
    monkeypatch.undo()
    stream = _CountingStream(50 * 1024**2)
    with pytest.raises(CorpusError, match="larger than the limit"):
        load_corpus(stream, name="stream.csv", max_bytes=1000)
    assert stream.read_bytes == 1001  # one byte past the limit, never the whole stream
