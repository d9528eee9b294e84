"""Reading an uploaded table: a file with more columns than a corpus could need is refused, by its true
width, before its rows are parsed, in every format; a header longer than the delimiter sniffer's sample is
read whole."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flare_core.data.reading import MAX_COLUMNS, read_table
from flare_core.errors import CorpusError


def _csv(names: list[str], sep: str = ",") -> bytes:
    """A header of ``names`` and one data row of as many cells."""
    return (sep.join(names) + "\n" + sep.join("x" for _ in names) + "\n").encode()


@pytest.mark.parametrize(
    ("names", "count"),
    [
        ([f"c{i}" for i in range(100_000)], "100,000"),
        ([f"c{i}" for i in range(99_999)], "99,999"),  # was "duplicate column names: 'c1094'": a cut header
        ([f"c{i:06d}" for i in range(100_000)], "100,000"),  # zero-padded: was read, slowly
    ],
)
def test_a_very_wide_csv_is_refused_by_its_true_width(names, count):
    with pytest.raises(CorpusError, match=f"^'wide.csv' has {count} columns; at most 2,000 are read$"):
        read_table(_csv(names), name="wide.csv")


def test_the_limit_is_the_same_in_every_format():
    wide = [f"field_{i}" for i in range(MAX_COLUMNS + 1)]
    parquet = io.BytesIO()
    pq.write_table(pa.table({n: ["x"] for n in wide}), parquet)
    jsonl = json.dumps(dict.fromkeys(wide, "x")) + "\n"
    for data, name in [
        (_csv(wide, "\t"), "wide.tsv"),
        (parquet.getvalue(), "wide.parquet"),
        (jsonl.encode(), "wide.jsonl"),
    ]:
        with pytest.raises(CorpusError, match=f"has 2,001 columns; at most {MAX_COLUMNS:,} are read"):
            read_table(data, name=name)
    with pytest.raises(CorpusError, match="'narrow.csv' has 3 columns; at most 2 are read"):
        read_table(_csv(["a", "b", "c"]), name="narrow.csv", max_columns=2)
    with pytest.raises(CorpusError, match="max_columns must be a positive integer"):
        read_table(_csv(["a", "b"]), name="narrow.csv", max_columns=0)


def test_a_header_longer_than_the_sniffed_sample_is_read_whole():
    """2,000 names of 40 characters (an 82 kB header, beyond the 64 kB sample): every name, in order; a
    duplicate far beyond the sample is found too."""
    names = [f"a_rather_long_column_name_number_{i:07d}" for i in range(MAX_COLUMNS)]
    frame, info = read_table(_csv(names), name="long.csv")
    assert list(frame.columns) == names and frame.shape == (1, MAX_COLUMNS) and info["delimiter"] == ","
    with pytest.raises(
        CorpusError, match="duplicate column names: 'a_rather_long_column_name_number_0000001'"
    ):
        read_table(_csv([*names[:-1], names[1]]), name="long.csv")
    assert pd.read_csv(io.BytesIO(_csv(names))).shape == frame.shape  # the reference reader agrees
