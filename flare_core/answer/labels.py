"""The labels a person gives a run, kept with the run: which text, which category, when and in what order.

One file, ``<run>/labels/labels.json``, written atomically under a lock of its own, so that two browser
tabs, or a tab and ``flare label``, never lose each other's labels, and a killed server loses nothing that
was saved::

    {"version": 1,
     "categories": ["sport", "politics"],             # in the order they were named (or first used)
     "named": true,                                   # named by the person (else taken from the labels)
     "entries": [{"row": 12, "label": "sport", "order": 1, "batch": 1, "at": "2026-…", "source": "page"}, …],
     "skipped": [{"row": 40, "order": 3, "batch": 1, "at": "…"}],   # shown, and marked skip / unsure
     "renamed": [{"from": "sprt", "to": "sport", "at": "…"}]}

``row`` is the text's position in the run's corpus (0 to N − 1, the ``row`` column of ``flare label``'s
files). Entries are never rewritten: a text labelled twice keeps its latest label, and a category renamed
takes its labels along (the rename is recorded).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from flare_core.store.locks import file_lock
from flare_core.store.runs import Run, utc_now

LABELS_FILE = ("labels", "labels.json")
_LOCK = ("labels", "labels.lock")
SCHEMA = 1
#: The longest category name kept (longer ones are refused with a message).
MAX_CATEGORY_CHARS = 80


@dataclass(frozen=True)
class LabelSet:
    """A run's labels as read: ``categories``, every ``entries`` row (oldest first), ``skipped`` rows."""

    categories: list[str] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    renamed: list[dict[str, Any]] = field(default_factory=list)
    #: whether the person named the categories (then a label outside them is refused); else the labels
    #: themselves name them, as a labels file does
    named: bool = False

    def latest(self) -> dict[int, str]:
        """Row → its latest label, in the order the rows were first labelled."""
        out: dict[int, str] = {}
        for entry in self.entries:
            out[int(entry["row"])] = str(entry["label"])
        return out

    @property
    def rows(self) -> np.ndarray:
        """The labelled rows (k,), first labelled first."""
        return np.asarray(list(self.latest()), dtype=np.int64)

    @property
    def labels(self) -> list[str]:
        """The labels of :attr:`rows`, in the same order."""
        return list(self.latest().values())

    @property
    def skipped_rows(self) -> list[int]:
        """Rows marked skip / unsure and not labelled since."""
        labelled = self.latest()
        return sorted({int(s["row"]) for s in self.skipped} - set(labelled))

    @property
    def batches(self) -> int:
        """How many batches of labels were saved."""
        return max([int(e.get("batch", 0)) for e in [*self.entries, *self.skipped]], default=0)

    def upto(self, batch: int) -> LabelSet:
        """The labels of batches 1 to ``batch``, as they stood once that batch was saved."""
        return LabelSet(self.categories, [e for e in self.entries if int(e.get("batch", 0)) <= batch])

    def counts(self) -> dict[str, int]:
        """Category → texts labelled with it (every category, 0 included)."""
        counts = {c: 0 for c in self.categories}
        for label in self.labels:
            counts[label] = counts.get(label, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SCHEMA,
            "categories": list(self.categories),
            "entries": list(self.entries),
            "skipped": list(self.skipped),
            "renamed": list(self.renamed),
            "named": bool(self.named),
        }


@contextlib.contextmanager
def labels_lock(run: Run) -> Iterator[None]:
    """Exclusive lock on the run's labels (read, change, write), released by the kernel if its holder dies."""
    with file_lock(run.artefact(*_LOCK)):
        yield


def load_labels(run: Run) -> LabelSet:
    """The run's labels (an empty :class:`LabelSet` when none were given)."""
    if not run.has(*LABELS_FILE):
        return LabelSet()
    data = run.load_json(*LABELS_FILE)
    if not isinstance(data, dict) or data.get("version") != SCHEMA:
        raise run.damaged("/".join(LABELS_FILE), ValueError("not a labels file of this version"))
    return LabelSet(
        categories=[str(c) for c in data.get("categories", [])],
        entries=list(data.get("entries", [])),
        skipped=list(data.get("skipped", [])),
        renamed=list(data.get("renamed", [])),
        named=bool(data.get("named", False)),
    )


def _save(run: Run, labels: LabelSet) -> LabelSet:
    run.save_json(labels.to_dict(), *LABELS_FILE)
    return labels


def _clean_category(name: Any) -> str:
    text = " ".join(str(name).split()) if name is not None else ""
    if not text:
        raise ValueError("a category needs a name: it cannot be empty")
    if len(text) > MAX_CATEGORY_CHARS:
        raise ValueError(
            f"category names are at most {MAX_CATEGORY_CHARS} characters; {text[:20]!r}… is longer"
        )
    return text


def set_categories(run: Run, names: Sequence[str]) -> LabelSet:
    """Name the categories a person labels with (at least two, all different). Categories that labels
    already use must stay: rename one with :func:`rename_category` instead of removing it."""
    cleaned = [_clean_category(n) for n in names]
    if len(set(cleaned)) < len(cleaned):
        repeated = next(c for c in cleaned if cleaned.count(c) > 1)
        raise ValueError(f"the category {repeated!r} is named twice: give each category its own name")
    if len(cleaned) < 2:
        raise ValueError(
            "name at least two categories: a choice between models needs texts of two kinds or more"
        )
    with labels_lock(run):
        current = load_labels(run)
        used = sorted(set(current.labels) - set(cleaned))
        if used:
            n = sum(label in used for label in current.labels)
            raise ValueError(
                f"{n} text(s) are labelled {used[0]!r}, which is no longer among the categories: rename "
                f"{used[0]!r} to keep its labels, or put it back"
            )
        return _save(run, LabelSet(cleaned, current.entries, current.skipped, current.renamed, named=True))


def rename_category(run: Run, old: str, new: str) -> LabelSet:
    """Rename category ``old`` to ``new``; the texts labelled ``old`` are labelled ``new`` from now on."""
    new = _clean_category(new)
    with labels_lock(run):
        current = load_labels(run)
        if old not in current.categories:
            raise ValueError(
                f"there is no category {old!r} to rename (the categories: {', '.join(current.categories)})"
            )
        if new in current.categories:
            raise ValueError(f"the category {new!r} exists already: choose another name")
        categories = [new if c == old else c for c in current.categories]
        entries = [{**e, "label": new} if e["label"] == old else e for e in current.entries]
        renamed = [*current.renamed, {"from": old, "to": new, "at": utc_now()}]
        return _save(run, LabelSet(categories, entries, current.skipped, renamed, named=current.named))


def _check_rows(rows: Sequence[Any], n_texts: int) -> list[int]:
    out = []
    for value in rows:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"row {value!r} is not a row number (0 to {n_texts - 1:,})") from None
            if not number.is_integer():
                raise ValueError(f"row {value!r} is not a whole row number (0 to {n_texts - 1:,})")
            value = int(number)
        if not 0 <= int(value) < n_texts:
            raise ValueError(
                f"row {int(value):,} is not in this run: its corpus has {n_texts:,} texts (rows 0 to {n_texts - 1:,})"
            )
        out.append(int(value))
    return out


def add_labels(
    run: Run,
    labels: Mapping[int, str] | Sequence[tuple[int, str]],
    *,
    skipped: Sequence[int] = (),
    source: str = "page",
) -> LabelSet:
    """Add a batch of labels (row → category) and of rows marked skip / unsure; returns the new set.

    Every row and label is checked before anything is written (a batch is kept whole or not at all):
    rows outside the corpus, a label that is not a category (when the person named the categories;
    otherwise the labels name them, as a labels file does), a row given two labels in one batch. A batch
    that changes nothing (every row already has that label) is not recorded again.
    """
    pairs = list(labels.items()) if isinstance(labels, Mapping) else [tuple(p) for p in labels]
    n_texts = int(run.manifest["corpus"]["n_texts"])
    rows = _check_rows([r for r, _ in pairs], n_texts)
    skip_rows = _check_rows(list(skipped), n_texts)
    values = [_clean_category(v) for _, v in pairs]
    given: dict[int, str] = {}
    for row, value in zip(rows, values, strict=True):
        if given.get(row, value) != value:
            raise ValueError(f"row {row:,} is given two labels in one batch ({given[row]!r} and {value!r})")
        given[row] = value
    if set(given) & set(skip_rows):
        row = sorted(set(given) & set(skip_rows))[0]
        raise ValueError(f"row {row:,} is both labelled and skipped in one batch")
    with labels_lock(run):
        current = load_labels(run)
        latest, skipped_now = current.latest(), set(current.skipped_rows)
        if all(latest.get(r) == v for r, v in given.items()) and set(skip_rows) <= skipped_now:
            return current  # the same batch saved again (a second click, a file read twice): nothing new
        categories = list(current.categories)
        unknown = sorted({v for v in given.values() if v not in categories})
        if unknown and current.named:
            raise ValueError(
                f"{unknown[0]!r} is not one of this run's categories ({', '.join(categories)}): add it to the "
                "categories first, or correct the label"
            )
        categories += [v for v in dict.fromkeys(given.values()) if v not in categories]
        batch, order, now = current.batches + 1, len(current.entries) + len(current.skipped), utc_now()
        entries = list(current.entries)
        for row, value in given.items():
            order += 1
            entries.append(
                {"row": row, "label": value, "order": order, "batch": batch, "at": now, "source": source}
            )
        skipped_entries = list(current.skipped)
        for row in skip_rows:
            order += 1
            skipped_entries.append({"row": row, "order": order, "batch": batch, "at": now, "source": source})
        return _save(
            run, LabelSet(categories, entries, skipped_entries, current.renamed, named=current.named)
        )


def read_labels_file(
    data: bytes, *, name: str = "labels.csv", texts: Sequence[str] | None = None
) -> list[tuple[int, str]]:
    """``(row, label)`` pairs of a labels file: a CSV (or TSV, JSON lines, Parquet) with the columns ``row``
    and ``label``; other columns are ignored and rows with a blank label skipped. Read like a corpus upload
    (encoding detected, nothing executed or unpickled); a file that is not UTF-8 and has no other readable
    encoding is refused with a message naming it. With the run's ``texts`` (its corpus, in row order), a
    file that has a ``text`` column (as ``flare label --next`` writes it) must show each row's own text:
    a file made for another run is refused."""
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
            f"{name} is not UTF-8 text (it reads only as {info['encoding']}), so a category could be misread: "
            "save the file as UTF-8 and read it again; no label was saved"
        )
    table = pd.DataFrame({"row": frame[columns["row"]], "label": frame[columns["label"]]})
    blank = table["label"].isna() | (table["label"].astype(str).str.strip() == "")
    if texts is not None and "text" in columns:
        _check_file_texts(frame.loc[~blank, columns["text"]], table.loc[~blank, "row"], texts, name)
    table = table[~blank]
    return [(_row_number(row), str(label)) for row, label in zip(table["row"], table["label"], strict=True)]


def _row_number(value: Any) -> Any:
    """A row cell as a whole number when it is one ("12" → 12), else as it is (refused later, with words)."""
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _check_file_texts(shown: pd.Series, rows: pd.Series, texts: Sequence[str], name: str) -> None:
    """Refuse a labels file whose ``text`` cells are not the run's texts of their rows."""
    from flare_core.store.export import neutralised

    def same(a: object, b: str) -> bool:
        cell = " ".join(str(a).split())
        return cell in {" ".join(b.split()), " ".join(str(neutralised(b)).split())}

    wrong = 0
    first = None
    for cell, row in zip(shown, rows, strict=True):
        number = _row_number(row)
        if not isinstance(number, int) or not 0 <= number < len(texts) or pd.isna(cell):
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
