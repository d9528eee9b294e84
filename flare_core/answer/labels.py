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
takes its labels along (the rename is recorded). A label changed on a text already labelled is a
correction: its entry says what it replaced (``"was"``) and carries the batch of the label it corrects, so
that every replay of the batches reads the corrected label.

The rules of what a label and a row are (:data:`RESERVED`, :data:`MISSING_WORDS`, :func:`row_number`):
"skip / unsure" is the page's choice for a text one cannot label, never a category; a cell reading "NA",
"N/A", "NaN", "None", "null" or "nil" (any case) is a missing value, as spreadsheets and programs write one,
so it is no label and no category name; a row is a whole number written with the digits 0 to 9.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flare_core.store.locks import file_lock
from flare_core.store.runs import Run, utc_now

LABELS_FILE = ("labels", "labels.json")
_LOCK = ("labels", "labels.lock")
SCHEMA = 1
#: The longest category name kept (longer ones are refused with a message).
MAX_CATEGORY_CHARS = 80
#: The choice for a text a person cannot or will not label (a label file's cell may say it too).
SKIP = "skip / unsure"
#: What spreadsheets and programs write for a missing value: read as no label, never a category name.
MISSING_WORDS = frozenset({"na", "n/a", "nan", "none", "null", "nil"})
#: Names no category may take: the skip choice and the missing-value words.
RESERVED = frozenset({SKIP, *MISSING_WORDS})
_ROW = re.compile(r"-?[0-9]+(?:\.0*)?")


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
        """The labels of batches 1 to ``batch``, as they stood once that batch was saved, corrected since
        (a correction carries the batch of the label it replaces)."""
        return LabelSet(self.categories, [e for e in self.entries if int(e.get("batch", 0)) <= batch])

    @property
    def revision(self) -> int:
        """The order of the latest change to the labels (0 before any): a page that drew its texts at one
        revision tells which labels were saved after it (:func:`save_batch`'s ``seen``)."""
        return max([int(e.get("order", 0)) for e in [*self.entries, *self.skipped]], default=0)

    @property
    def corrections(self) -> list[dict[str, Any]]:
        """The entries that corrected a saved label (each with the label it replaced, ``was``)."""
        return [e for e in self.entries if "was" in e]

    def last_corrections(self) -> list[dict[str, Any]]:
        """The corrections saved after every other change, when the latest change was a correction: the
        answer then says its change came from them (else [])."""
        plain = [int(e.get("order", 0)) for e in [*self.entries, *self.skipped] if "was" not in e]
        return [e for e in self.corrections if int(e.get("order", 0)) > max(plain, default=0)]

    def before_last_corrections(self) -> LabelSet:
        """The labels as they stood before :meth:`last_corrections`."""
        dropped = {int(e["order"]) for e in self.last_corrections()}
        kept = [e for e in self.entries if int(e.get("order", 0)) not in dropped]
        return LabelSet(self.categories, kept, self.skipped, self.renamed, named=self.named)

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
    if text.lower() == SKIP:
        raise ValueError(
            f"{text!r} cannot be a category: it is the choice for a text you cannot label (those texts are "
            "set aside, not labelled); name the category in other words"
        )
    if text.lower() in MISSING_WORDS:
        raise ValueError(
            f"{text!r} cannot be a category: spreadsheets and programs write it for a missing value, so a "
            "labels file would read it as no label; name the category in words, such as 'no topic' or 'other'"
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
        entries = [{**e, "was": new} if e.get("was") == old else e for e in entries]
        renamed = [*current.renamed, {"from": old, "to": new, "at": utc_now()}]
        return _save(run, LabelSet(categories, entries, current.skipped, renamed, named=current.named))


def row_number(value: Any) -> int | None:
    """A row cell as a row number, or None when it is not one: a whole number (an integer, or a float
    with no fraction, as a number column holds it) or text of the digits 0 to 9 ("12", " 12 ", "12.0"). Text
    such as "1e1", "0x1F", "+3" or "٣" (digits of another script) is not read as a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return int(value) if np.isfinite(value) and float(value).is_integer() else None
    text = str(value).strip()
    return int(float(text)) if _ROW.fullmatch(text) else None


def _check_rows(rows: Sequence[Any], n_texts: int) -> list[int]:
    out = []
    for value in rows:
        number = row_number(value)
        if number is None:
            if _ROW.fullmatch(str(value).strip().split(".")[0] or "x"):
                raise ValueError(f"row {value!r} is not a whole row number (0 to {n_texts - 1:,})")
            raise ValueError(
                f"row {value!r} is not a row number: rows are whole numbers written with the digits 0 to 9 "
                f"(0 to {n_texts - 1:,}), as `flare label --next` writes them"
            )
        if not 0 <= number < n_texts:
            raise ValueError(
                f"row {number:,} is not in this run: its corpus has {n_texts:,} texts (rows 0 to "
                f"{n_texts - 1:,})"
            )
        out.append(number)
    return out


@dataclass(frozen=True)
class Saved:
    """What :func:`save_batch` did: the ``labels`` now, how many texts were ``added``, the ``corrected``
    labels ``(row, was, now)``, the labels ``not_saved`` ``(row, given, saved meanwhile)`` because another
    tab or ``flare label`` labelled the text after the page drew it, and the renamed categories ``mapped``
    (old name → new name, labels read so)."""

    labels: LabelSet
    added: int = 0
    corrected: list[tuple[int, str, str]] = field(default_factory=list)
    not_saved: list[tuple[int, str, str]] = field(default_factory=list)
    mapped: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: texts marked skip / unsure that have a label ``(row, label)``: they keep it
    not_skipped: list[tuple[int, str]] = field(default_factory=list)

    def notes(self) -> list[str]:
        """Each thing a person must be told, in a sentence: corrections, labels not saved, names mapped."""
        out = [
            f"{old!r} was renamed {new!r}: {n} label(s) given as {old!r} were saved as {new!r}."
            for old, (new, n) in self.mapped.items()
        ]
        if self.corrected:
            out.append(
                f"Corrected {len(self.corrected)} label(s): "
                + _listed([f"row {r:,} {was!r} → {now!r}" for r, was, now in self.corrected])
                + "."
            )
        if self.not_saved:
            out.append(
                f"{len(self.not_saved)} of your label(s) were not saved: the text(s) were labelled "
                "meanwhile, in another tab or with `flare label`: "
                + _listed([f"row {r:,} (yours {g!r}, saved {s!r})" for r, g, s in self.not_saved])
                + ". Where yours is right, correct the saved label."
            )
        if self.not_skipped:
            out.append(
                f"{len(self.not_skipped)} text(s) marked {SKIP} keep their label (a labelled text is not set "
                "aside; correct its label instead): "
                + _listed([f"row {r:,} ({label!r})" for r, label in self.not_skipped])
                + "."
            )
        return out


def _listed(items: list[str], most: int = 6) -> str:
    shown = ", ".join(items[:most])
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def _renames(current: LabelSet) -> dict[str, str]:
    """Each former category name → the name it carries now (renames followed to the end), for names that
    are no category today."""
    step = {str(r["from"]): str(r["to"]) for r in current.renamed}
    out = {}
    for old in step:
        new, seen = step[old], {old}
        while new in step and new not in seen and new not in current.categories:
            seen.add(new)
            new = step[new]
        if old not in current.categories and new in current.categories:
            out[old] = new
    return out


def add_labels(
    run: Run,
    labels: Mapping[int, str] | Sequence[tuple[int, str]],
    *,
    skipped: Sequence[int] = (),
    source: str = "page",
) -> LabelSet:
    """:func:`save_batch`, returning only the labels now."""
    return save_batch(run, labels, skipped=skipped, source=source).labels


def _given(
    run: Run, labels: Mapping[int, str] | Sequence[tuple[int, str]], skipped: Sequence[int]
) -> tuple[dict[int, str], list[int]]:
    """The batch checked: row → category (clean names) and the skipped rows, or a ValueError."""
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
    return given, skip_rows


def save_batch(
    run: Run,
    labels: Mapping[int, str] | Sequence[tuple[int, str]],
    *,
    skipped: Sequence[int] = (),
    source: str = "page",
    seen: int | None = None,
) -> Saved:
    """Save a batch of labels (row → category) and of rows marked skip / unsure.

    Every row and label is checked before anything is written: rows outside the corpus, a label that is
    not a category (when the person named the categories; otherwise the labels name them, as a labels file
    does), a row given two labels in one batch; a bad batch changes nothing. A label given as the former
    name of a renamed category is saved under its new name, and said so. A text given the label it has is
    nothing new; a text given another label is a correction. ``seen``: the labels' :attr:`LabelSet.revision`
    when the page drew the batch: a text labelled after it (another tab, ``flare label``) keeps that label,
    and the label given here is returned in :attr:`Saved.not_saved`, never dropped in silence; the batch's
    other labels are saved.
    """
    given, skip_rows = _given(run, labels, skipped)
    with labels_lock(run):
        current = load_labels(run)
        renames, mapped = _renames(current), {}
        for row, value in list(given.items()):
            if value in renames:
                given[row] = renames[value]
                mapped[value] = (renames[value], mapped.get(value, ("", 0))[1] + 1)
        categories = list(current.categories)
        unknown = sorted({v for v in given.values() if v not in categories})
        if unknown and current.named:
            raise ValueError(
                f"{unknown[0]!r} is not one of this run's categories ({', '.join(categories)}): add it to "
                "the categories first, or correct the label"
            )
        latest, skipped_now = current.latest(), set(current.skipped_rows)
        when = {int(e["row"]): int(e.get("order", 0)) for e in current.entries}
        stale = set() if seen is None else {r for r, order in when.items() if order > seen}
        new = {r: v for r, v in given.items() if r not in latest}
        changed = {r: v for r, v in given.items() if r in latest and latest[r] != v}
        not_saved = [(r, v, latest[r]) for r, v in changed.items() if r in stale]
        not_saved += [(r, SKIP, latest[r]) for r in skip_rows if r in latest and r in stale]
        not_skipped = [(r, latest[r]) for r in skip_rows if r in latest and r not in stale]
        corrected = [(r, latest[r], v) for r, v in changed.items() if r not in stale]
        skips = [r for r in skip_rows if r not in latest and r not in skipped_now]
        if not (new or corrected or skips):
            return Saved(current, not_saved=not_saved, mapped=mapped, not_skipped=not_skipped)  # nothing new
        categories += [v for v in dict.fromkeys(given.values()) if v not in categories]
        entries, skipped_entries = list(current.entries), list(current.skipped)
        batch, order, now = current.batches + 1, current.revision, utc_now()
        first_batch: dict[int, int] = {}
        for entry in current.entries:
            first_batch.setdefault(int(entry["row"]), int(entry.get("batch", 0)))
        for row, value in new.items():
            order += 1
            entries.append(
                {"row": row, "label": value, "order": order, "batch": batch, "at": now, "source": source}
            )
        for row, was, value in corrected:
            order += 1
            entry = {"row": row, "label": value, "order": order, "batch": first_batch[row], "at": now}
            entries.append({**entry, "source": source, "was": was})
        for row in skips:
            order += 1
            skipped_entries.append({"row": row, "order": order, "batch": batch, "at": now, "source": source})
        saved = _save(
            run, LabelSet(categories, entries, skipped_entries, current.renamed, named=current.named)
        )
        return Saved(saved, len(new), corrected, not_saved, mapped, not_skipped)


def correct_label(run: Run, row: int, label: str, *, source: str = "page") -> Saved:
    """Correct the saved label of ``row`` to ``label`` (a category): the new label replaces the old one in
    every figure and replay, and is recorded as a correction. A row not labelled yet is refused."""
    if int(row) not in load_labels(run).latest():
        raise ValueError(f"row {int(row):,} has no saved label to correct: label it in a batch")
    return save_batch(run, {int(row): label}, source=source)
