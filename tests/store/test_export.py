"""CSV exports of run data: cells that look like spreadsheet formulas are neutralised, numbers are not."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from flare_core.data.corpus import load_corpus
from flare_core.store.export import safe_csv


def test_formula_texts_are_kept_verbatim_and_escaped_by_safe_csv(tmp_path):
    formulas = ["=cmd|' /C calc'!A0", "+1", "@SUM(A1:A9)", "-2+3", "\t=1+1", '=HYPERLINK("http://x")']
    path = tmp_path / "f.csv"
    pd.DataFrame({"text": formulas + ["plain words"], "label": ["=1+1", "b"] * 3 + ["a"]}).to_csv(
        path, index=False
    )
    corpus = load_corpus(path, text_column="text", label_column="label")
    assert corpus.texts == formulas + ["plain words"]
    frame = corpus.to_frame()
    frame["=bad column"] = 1.5
    rows = list(csv.reader(io.StringIO(safe_csv(frame).decode("utf-8"))))
    header, body = rows[0], rows[1:]
    assert header == ["id", "text", "label", "'=bad column"]
    assert [r[1] for r in body] == ["'" + f for f in formulas] + ["plain words"]
    assert body[0][2] == "'=1+1" and body[1][2] == "b"
    assert [r[0] for r in body] == [str(i) for i in range(7)] and body[0][3] == "1.5"  # numbers untouched
    for row in body:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t")) or cell == ""


def test_texts_round_trip_exactly_and_only_formulas_change():
    """A text with quotes, an ampersand, markup and line breaks comes back from the CSV as it went in (no
    HTML entity, no lost line); a formula comes back with its one leading ``'``."""
    texts = [
        'She said "stop" & <b>left</b>\nthen "came back", twice;\r\nend &amp; &quot;',
        '=HYPERLINK("http://example.org/x", "details")',
        "  =not at the start",
        "tab\tinside, and a comma",
    ]
    frame = pd.DataFrame({"text": texts, "label": ["a", "b", "a", "@b"], "score": [0.5, -1.25, 3.0, 0.0]})
    back = pd.read_csv(io.BytesIO(safe_csv(frame)), keep_default_na=False)
    expected = [texts[0], "'" + texts[1], texts[2], texts[3]]
    assert back["text"].tolist() == expected
    assert back["label"].tolist() == ["a", "b", "a", "'@b"]
    assert back["score"].tolist() == [0.5, -1.25, 3.0, 0.0]
    assert b"&amp;amp;" not in safe_csv(frame) and b"&quot;stop" not in safe_csv(frame)


def test_safe_csv_needs_a_frame():
    with pytest.raises(ValueError, match="safe_csv needs a pandas DataFrame, got list"):
        safe_csv([["=1"]])
