"""A labels file read back: the spreadsheet ``flare label --next`` wrote, with the person's labels.

Its cells are read by the rules of :mod:`flare_core.answer.labels`: a row is a whole number written with the
digits 0 to 9; a label cell left blank, or reading a missing value ("NA", "N/A", "NaN", "None", "null",
"nil", any case), is no label; a cell reading "skip / unsure" sets the text aside, as the page's choice does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from flare_core.answer.labels import MISSING_WORDS, SKIP, row_number


def read_labels_file(
    data: bytes,
    *,
    name: str = "labels.csv",
    texts: Sequence[str] | None = None,
    notes: list[str] | None = None,
) -> list[tuple[Any, str]]:
    """``(row, label)`` pairs of a labels file: a CSV (or TSV, JSON lines, Parquet) with the columns ``row``
    and ``label``; other columns are ignored and rows with a blank or missing label skipped (a sentence
    counting the missing ones is added to ``notes``); a text set aside reads as ``(row, SKIP)``. Read like a
    corpus upload (encoding detected, nothing executed or unpickled); a file that is not UTF-8 and has no
    other readable encoding is refused with a message naming it. With the run's ``texts`` (its corpus, in
    row order), a file that has a ``text`` column (as ``flare label --next`` writes it) must show each row's
    own text: a file made for another run is refused."""
    from flare_core.data.reading import read_table
    from flare_core.errors import CorpusError

    try:
        frame, info = read_table(data, name=name, max_bytes=64 * 2**20)
    except CorpusError as exc:
        raise ValueError(f"{name} could not be read as a labels file: {exc}") from exc
    columns = {str(c).strip().lower(): c for c in frame.columns}
    missing = [c for c in ("row", "label") if c not in columns]
    if missing:
        raise ValueError(
            f"{name} has no column {missing[0]!r}: a labels file needs the columns 'row' and 'label' "
            f"(it has {', '.join(map(str, frame.columns)) or 'none'})"
        )
    if info.get("encoding") not in ("utf-8", "utf-8-sig", "parquet", None):
        raise ValueError(
            f"{name} is not UTF-8 text (it reads only as {info['encoding']}), so a category could be "
            "misread: save the file as UTF-8 and read it again; no label was saved"
        )
    table = pd.DataFrame({"row": frame[columns["row"]], "label": frame[columns["label"]]})
    words = table["label"].astype(str).str.strip()
    blank = table["label"].isna() | (words == "")
    absent = ~blank & words.str.lower().isin(MISSING_WORDS)
    if absent.any() and notes is not None:
        said = sorted(set(words[absent]))
        notes.append(
            f"{int(absent.sum())} label cell(s) of {name} read {', '.join(map(repr, said))}, a missing "
            "value: those texts were read as not labelled"
        )
    if texts is not None and "text" in columns:
        keep = ~blank & ~absent
        _check_file_texts(frame.loc[keep, columns["text"]], table.loc[keep, "row"], texts, name)
    table = table[~blank & ~absent]
    skip = words[table.index].str.lower() == SKIP
    return [
        (_row_cell(row), SKIP if skipped else str(label))
        for row, label, skipped in zip(table["row"], table["label"], skip, strict=True)
    ]


def _row_cell(value: Any) -> Any:
    """A row cell as its row number when it is one ("12" → 12), else as it is (refused later, with words)."""
    number = row_number(value)
    return value if number is None else number


def _check_file_texts(shown: pd.Series, rows: pd.Series, texts: Sequence[str], name: str) -> None:
    """Refuse a labels file whose ``text`` cells are not the run's texts of their rows."""
    from flare_core.store.export import neutralised

    def same(a: object, b: str) -> bool:
        cell = " ".join(str(a).split())
        return cell in {" ".join(b.split()), " ".join(str(neutralised(b)).split())}

    wrong = 0
    first = None
    for cell, row in zip(shown, rows, strict=True):
        number = row_number(row)
        if number is None or not 0 <= number < len(texts) or pd.isna(cell):
            continue  # a bad row number is refused later, with its own message
        if not same(cell, texts[number]):
            wrong += 1
            first = first if first is not None else number
    if wrong:
        raise ValueError(
            f"{name} is not a labels file of this run: the text of row {first:,} (and {wrong - 1} other(s)) "
            "differs from this run's text there. Label the file `flare label RUN --next` wrote for this run; "
            "no label was saved"
        )
