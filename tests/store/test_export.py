"""CSV exports of run data: cells that look like spreadsheet formulas are neutralised, numbers are not."""

from __future__ import annotations

import csv
import io

import pandas as pd

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
