"""The label store: labels kept whole with time and order, bad input refused before anything is written,
categories named and renamed, labels files read as the spreadsheet wrote them, two writers at once."""

from __future__ import annotations

import multiprocessing

import pandas as pd
import pytest

from flare_core.answer import labels as store
from flare_core.answer.labels_file import read_labels_file
from flare_core.store.runs import RunStore


def _snapshot(run) -> bytes | None:
    return run.artefact(*store.LABELS_FILE).read_bytes() if run.has(*store.LABELS_FILE) else None


def test_labels_are_kept_with_time_order_and_batch_and_the_latest_label_wins(unlabelled):
    run, _ = unlabelled
    assert store.load_labels(run).entries == []
    store.set_categories(run, ["sport", "politics"])
    store.add_labels(run, {3: "sport", 7: "politics"}, skipped=[9])
    saved = store.add_labels(run, [(3, "politics"), (11, "sport")])
    assert saved.latest() == {3: "politics", 7: "politics", 11: "sport"}
    assert list(saved.rows) == [3, 7, 11] and saved.labels == ["politics", "politics", "sport"]
    # row 11 is new (batch 2); row 3's new label corrects the label of batch 1, and says what it replaced
    assert [e["order"] for e in saved.entries] == [1, 2, 4, 5]
    assert [(e["row"], e["batch"], e.get("was")) for e in saved.entries] == [
        (3, 1, None),
        (7, 1, None),
        (11, 2, None),
        (3, 1, "sport"),
    ]
    assert saved.skipped_rows == [9] and saved.batches == 2 and all(e["at"] for e in saved.entries)
    assert store.load_labels(run).to_dict() == saved.to_dict()  # what was returned is what is on disk
    store.add_labels(run, {9: "sport"})  # a skipped text labelled later is no longer skipped
    assert store.load_labels(run).skipped_rows == []


@pytest.mark.parametrize(
    ("labels", "skipped", "message"),
    [
        ({600: "sport"}, [], r"row 600 is not in this run: its corpus has 60 texts \(rows 0 to 59\)"),
        ({-1: "sport"}, [], r"row -1 is not in this run"),
        ([("2.5", "sport")], [], r"row '2.5' is not a whole row number"),
        ([("abc", "sport")], [], r"row 'abc' is not a row number"),
        ({1: "tennis"}, [], r"'tennis' is not one of this run's categories \(sport, politics\)"),
        ([(1, "sport"), (1, "politics")], [], r"row 1 is given two labels in one batch"),
        ({1: "sport"}, [1], r"row 1 is both labelled and skipped"),
        ({1: "   "}, [], r"a category needs a name"),
        ({}, [70], r"row 70 is not in this run"),
    ],
)
def test_bad_labels_are_refused_whole_and_change_nothing(unlabelled, labels, skipped, message):
    run, _ = unlabelled
    store.set_categories(run, ["sport", "politics"])
    store.add_labels(run, {0: "sport"})
    before = _snapshot(run)
    with pytest.raises(ValueError, match=message):
        store.add_labels(run, labels, skipped=skipped)
    assert _snapshot(run) == before


def test_categories_two_at_least_distinct_and_a_used_one_is_renamed_not_dropped(unlabelled):
    run, _ = unlabelled
    with pytest.raises(ValueError, match="name at least two categories"):
        store.set_categories(run, ["only"])
    with pytest.raises(ValueError, match="'a' is named twice"):
        store.set_categories(run, ["a", " a "])
    store.set_categories(run, ["sprt", "politics"])
    store.add_labels(run, {1: "sprt", 2: "politics", 4: "sprt"})
    before = _snapshot(run)
    with pytest.raises(
        ValueError, match=r"2 text\(s\) are labelled 'sprt', which is no longer among the categories"
    ):
        store.set_categories(run, ["sport", "politics"])  # renamed halfway by retyping the list
    assert _snapshot(run) == before
    renamed = store.rename_category(run, "sprt", "sport")
    assert renamed.categories == ["sport", "politics"] and renamed.latest() == {
        1: "sport",
        2: "politics",
        4: "sport",
    }
    assert renamed.renamed[0]["from"] == "sprt" and renamed.renamed[0]["to"] == "sport"
    with pytest.raises(ValueError, match="'politics' exists already"):
        store.rename_category(run, "sport", "politics")
    with pytest.raises(ValueError, match="no category 'sprt' to rename"):
        store.rename_category(run, "sprt", "x")


def test_without_named_categories_a_file_names_them(unlabelled):
    run, _ = unlabelled
    saved = store.add_labels(run, [(0, "sport"), (1, "tech")], source="file")
    assert saved.categories == ["sport", "tech"] and saved.entries[0]["source"] == "file"


def test_a_labels_file_reads_row_and_label_and_ignores_the_rest():
    data = b"row,text,label,note\n4,some text,sport,x\n5,other,,y\n6,more,politics,\n"
    assert read_labels_file(data) == [(4, "sport"), (6, "politics")]
    with pytest.raises(ValueError, match="has no column 'label'"):
        read_labels_file(b"row,category\n1,sport\n")


def test_a_labels_file_in_another_encoding_is_refused_with_what_to_do():
    with pytest.raises(
        ValueError, match=r"not UTF-8 text \(it reads only as cp1252\).*save the file as UTF-8"
    ):
        read_labels_file("row,label\n1,café\n".encode("cp1252"), name="labels.csv")
    with pytest.raises(ValueError, match="UTF-16"):
        read_labels_file("row,label\n1,sport\n".encode("utf-16"), name="labels.csv")
    assert read_labels_file("row,label\n1,café\n".encode("utf-8-sig")) == [(1, "café")]


def _add_many(root: str, run_id: str, first: int) -> None:
    run = RunStore(root).get(run_id)
    for row in range(first, first + 20):
        store.add_labels(run, {row: "sport" if row % 2 else "politics"})


def test_two_writers_at_once_lose_nothing(unlabelled):
    """Two processes (two browser tabs, or a tab and `flare label`) saving batches at the same time."""
    run, _ = unlabelled
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_add_many, args=(str(run.path.parent), run.id, f)) for f in (0, 20)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
    assert [w.exitcode for w in writers] == [0, 0]
    saved = store.load_labels(run)
    assert sorted(saved.latest()) == list(range(40)) and len(saved.entries) == 40
    assert sorted(e["order"] for e in saved.entries) == list(range(1, 41))


# -- bad input around a person's batches: a clear message or a correct answer, and nothing lost ---------


def test_the_same_batch_saved_twice_is_kept_once(unlabelled):
    run, truth = unlabelled
    batch = {r: truth[r] for r in range(8)}
    first = store.add_labels(run, batch, skipped=[20])
    again = store.add_labels(run, batch, skipped=[20])  # a second click on Save, or the file read twice
    assert again.to_dict() == first.to_dict() == store.load_labels(run).to_dict() and again.batches == 1
    other = "tech" if truth[0] != "tech" else "sport"
    changed = store.save_batch(run, {**batch, 0: other})  # the same batch with one label changed
    assert changed.corrected == [(0, truth[0], other)] and changed.added == 0
    assert changed.labels.batches == 1 and len(changed.labels.entries) == 9  # one correction, no batch
    assert changed.labels.entries[-1]["was"] == truth[0] and changed.labels.entries[-1]["batch"] == 1


def test_a_labels_file_of_another_run_is_refused_and_changes_nothing(unlabelled, tmp_path):
    from flare_core.answer.from_labels import next_texts
    from flare_core.store.export import safe_csv

    run, truth = unlabelled
    texts = run.corpus_frame()["text"].tolist()
    todo = next_texts(run, store.load_labels(run), 6).assign(label=lambda f: [truth[r] for r in f["row"]])
    own = safe_csv(todo[["row", "text", "label"]])
    assert len(read_labels_file(own, texts=texts)) == 6  # this run's own file reads
    other = todo.assign(text=[f"another corpus's text {i}" for i in range(6)])
    with pytest.raises(
        ValueError, match=r"is not a labels file of this run: the text of row \d+ \(and 5 other"
    ):
        read_labels_file(safe_csv(other[["row", "text", "label"]]), texts=texts)
    assert store.load_labels(run).entries == []
    # a text that starts like a spreadsheet formula reads back as the run's own, its "'" and all
    formula = ["=1+1 is not a formula here", *texts[1:]]
    cell = safe_csv(pd.DataFrame({"row": [0], "text": [formula[0]], "label": ["sport"]}))
    assert read_labels_file(cell, texts=formula) == [(0, "sport")]


def test_a_category_removed_halfway_keeps_its_labels_and_an_empty_one_goes(unlabelled):
    run, truth = unlabelled
    store.set_categories(run, ["sport", "politics", "tech", "weather"])
    store.add_labels(run, {r: truth[r] for r in range(12)})
    with pytest.raises(ValueError, match=r"4 text\(s\) are labelled 'tech', which is no longer among"):
        store.set_categories(run, ["sport", "politics", "weather"])
    assert len(store.load_labels(run).entries) == 12  # nothing lost
    kept = store.set_categories(run, ["sport", "politics", "tech"])  # 'weather' had no label
    assert kept.counts() == {"sport": 4, "politics": 4, "tech": 4}


def test_a_category_with_no_label_and_every_text_labelled_give_an_answer(unlabelled):
    from flare_core.answer.from_labels import next_texts
    from flare_core.answer.write import write_verdict

    run, truth = unlabelled
    store.set_categories(run, ["sport", "politics", "tech", "weather"])  # 'weather' gets no label
    store.add_labels(run, {r: truth[r] for r in range(24)})
    verdict = write_verdict(run)
    assert verdict["basis"] == "few labels" and verdict["few_labels"]["counts"].get("weather", 0) == 0
    assert verdict["recommended"] == "clear"
    store.add_labels(run, {r: truth[r] for r in range(60)})  # every text of the corpus
    verdict = write_verdict(run)
    assert verdict["recommended"] == "clear" and verdict["few_labels"]["n_labels"] == 60
    assert next_texts(run, store.load_labels(run), 16).empty  # nothing left to ask about


# -- stale pages, corrections, reserved words, renamed names in old files, odd cells ------------------------


def test_a_stale_page_merges_what_it_can_and_names_what_it_did_not_save(unlabelled):
    """Two tabs draw the same texts; tab 1 saves; tab 2 saves its own labels from its stale page."""
    run, truth = unlabelled
    store.set_categories(run, ["sport", "politics", "tech"])
    seen = store.load_labels(run).revision  # both tabs drew their batch here
    tab1 = {r: truth[r] for r in range(8)}
    store.save_batch(run, tab1, seen=seen)
    other = {"sport": "politics", "politics": "tech", "tech": "sport"}
    tab2 = {**{r: truth[r] for r in range(4)}, **{r: other[truth[r]] for r in range(4, 8)}, 20: truth[20]}
    saved = store.save_batch(run, tab2, skipped=[21], seen=seen)
    # same texts and labels: nothing to do; other texts: kept; same texts, other labels: named, not saved
    assert saved.added == 1 and saved.corrected == []
    assert saved.not_saved == [(r, other[truth[r]], truth[r]) for r in range(4, 8)]
    assert saved.labels.latest() == {**tab1, 20: truth[20]} and saved.labels.skipped_rows == [21]
    (note,) = saved.notes()
    assert note.startswith("4 of your label(s) were not saved") and "row 4 (yours" in note
    assert store.load_labels(run).to_dict() == saved.labels.to_dict()
    # without a stale page (a file, the correction box) a changed label is a correction
    corrected = store.save_batch(run, {4: other[truth[4]]}, source="file")
    assert corrected.corrected == [(4, truth[4], other[truth[4]])] and corrected.not_saved == []
    kept = store.save_batch(run, {}, skipped=[0, 22], source="file")  # a labelled text is not set aside
    assert kept.not_skipped == [(0, truth[0])] and kept.labels.skipped_rows == [21, 22]
    assert (
        kept.notes()[0].startswith("1 text(s) marked skip / unsure keep their label")
        and "row 0" in kept.notes()[0]
    )


def test_a_correction_replaces_the_label_everywhere_and_is_recorded(unlabelled):
    run, truth = unlabelled
    store.set_categories(run, ["sport", "politics", "tech"])
    store.add_labels(run, {r: truth[r] for r in range(8)})
    store.add_labels(run, {r: truth[r] for r in range(8, 16)})
    wrong = "tech" if truth[2] != "tech" else "sport"
    saved = store.correct_label(run, 2, wrong).labels
    assert saved.latest()[2] == wrong and saved.upto(1).latest()[2] == wrong  # the replay reads it too
    assert saved.batches == 2 and [e["row"] for e in saved.last_corrections()] == [2]
    assert saved.before_last_corrections().latest()[2] == truth[2]
    store.add_labels(run, {20: truth[20]})
    assert store.load_labels(run).last_corrections() == []  # the latest change is a batch again
    with pytest.raises(ValueError, match="row 30 has no saved label to correct"):
        store.correct_label(run, 30, "sport")


@pytest.mark.parametrize("name", ["skip / unsure", "Skip / Unsure", "NA", "none", "NULL", "n/a", "NaN"])
def test_reserved_words_are_no_category(unlabelled, name):
    run, _ = unlabelled
    with pytest.raises(ValueError, match=f"{name!r} cannot be a category"):
        store.set_categories(run, ["sport", name])
    with pytest.raises(ValueError, match=f"{name!r} cannot be a category"):
        store.add_labels(run, {0: name}, source="file")
    store.set_categories(run, ["sport", "politics"])
    with pytest.raises(ValueError, match=f"{name!r} cannot be a category"):
        store.rename_category(run, "sport", name)
    assert store.load_labels(run).entries == [] and store.load_labels(run).categories == ["sport", "politics"]


def test_an_old_file_after_a_rename_is_read_under_the_new_name(unlabelled):
    run, _ = unlabelled
    store.add_labels(run, [(r, "bill" if r % 2 else "other") for r in range(14)], source="file")
    store.rename_category(run, "bill", "money")
    again = store.save_batch(run, [(r, "bill" if r % 2 else "other") for r in range(14)], source="file")
    assert again.labels.categories == ["other", "money"]  # "bill" is not made again
    assert again.mapped == {"bill": ("money", 7)} and again.added == 0 and again.corrected == []
    assert again.notes() == ["'bill' was renamed 'money': 7 label(s) given as 'bill' were saved as 'money'."]
    more = store.save_batch(run, [(20, "bill")], source="file")
    assert more.labels.latest()[20] == "money" and "bill" not in more.labels.categories


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("1e1", r"row '1e1' is not a row number: rows are whole numbers written with the digits 0 to 9"),
        ("٣", r"row '٣' is not a row number"),
        ("+3", r"row '\+3' is not a row number"),
        ("0x1F", r"row '0x1F' is not a row number"),
        ("2.5", r"row '2.5' is not a whole row number"),
    ],
)
def test_odd_row_numbers_are_refused(unlabelled, cell, message):
    run, _ = unlabelled
    pairs = read_labels_file(f"row,label\n{cell},sport\n".encode())
    with pytest.raises(ValueError, match=message):
        store.add_labels(run, pairs, source="file")
    assert store.load_labels(run).entries == []
    assert read_labels_file(b"row,label\n 12 ,sport\n13.0,tech\n") == [(12, "sport"), (13, "tech")]


def test_missing_value_cells_are_no_label_and_a_skip_cell_sets_the_text_aside():
    notes: list[str] = []
    data = b"row,label\n1,NA\n2,null\n3,None\n4,sport\n5,skip / unsure\n6,n/a\n"
    assert read_labels_file(data, notes=notes) == [(4, "sport"), (5, store.SKIP)]
    assert notes == [
        "4 label cell(s) of labels.csv read 'NA', 'None', 'n/a', 'null', a missing value: those texts were read "
        "as not labelled"
    ]
