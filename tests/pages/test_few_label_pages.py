"""The pages of a run without labels of its own after a person gave it 32 labels in two batches, through
Streamlit's AppTest: the labels are counted everywhere, the stopping advice shows its reason, Validation
judges the map against them, and nothing on screen reads 'None', 'nan', 'null' or JSON."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from flare_core.answer import labels as label_store
from flare_core.answer.stored import load_verdict
from flare_core.answer.write import write_verdict
from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.support import page_texts, shown

APP = str(Path(__file__).resolve().parents[2] / "app.py")
pytestmark = pytest.mark.slow
#: What must never be read on a page: a missing value or JSON as the code wrote it.
RAW = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\bnull\b|NULL|\{\"|\[\{")


@pytest.fixture(scope="module")
def few_labelled(tmp_path_factory, unlabelled_run, small_corpus_path):
    """A copy of the label-free fixture run, with 32 of its texts labelled (the truth) in 2 batches."""
    store = RunStore(tmp_path_factory.mktemp("few-labels") / "runs")
    shutil.copytree(unlabelled_run.path, store.root / unlabelled_run.id)
    run = store.get(unlabelled_run.id)
    truth = pd.read_csv(small_corpus_path)["label"].astype(str).tolist()
    label_store.set_categories(run, sorted(set(truth)))
    for batch in (range(0, 48, 3), range(1, 48, 3)):  # 16 rows each, every topic in each
        label_store.add_labels(run, {r: truth[r] for r in batch})
    write_verdict(run)
    return store, run


@pytest.fixture
def open_page(few_labelled, monkeypatch):
    store, run = few_labelled
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    for name in ("FLARE_OWNER_TOKEN", "FLARE_VIEWER_ONLY", "FLARE_OWNER_EMAILS"):
        monkeypatch.delenv(name, raising=False)

    def _open(page: str, params: dict[str, str] | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120)
        for key, value in (params or {"run": run.id}).items():
            at.query_params[key] = value
        at.run()
        if page != "dashboard/overview.py":
            at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return _open


def _answer(at: AppTest) -> str:
    """The answer's box: its headline and summary, as a person reads them."""
    alerts = [*at.info, *at.success, *at.warning]
    return "\n".join(shown(a.value) for a in alerts if str(a.value).startswith("**"))


def _cells(at: AppTest) -> list[str]:
    """Every heading and cell of the page's tables (not the batch to label, whose empty choices are blank)."""
    frames = [f.value for f in at.dataframe if "text" not in f.value.columns]
    return [str(v) for frame in frames for v in [*frame.columns, *frame.to_numpy().ravel()]]


def test_the_overview_counts_the_labels_and_shows_why_the_advice_says_what_it_says(open_page, few_labelled):
    _, run = few_labelled
    verdict = load_verdict(run)
    assert verdict["basis"] == "few labels" and verdict["few_labels"]["n_labels"] == 32
    at = open_page("dashboard/overview.py")
    text = page_texts(at)
    assert "labels: 32 given, in 2 batches" in text and "labels: none" not in text
    reason = verdict["few_labels"]["advice"]["text"]
    assert verdict["details"].startswith(reason) and reason in text  # under the answer's details
    assert verdict["headline"] in _answer(at)
    chances = next(f.value for f in at.dataframe if "chance it is the best" in f.value.columns)
    expected = [
        int(min(max(np.floor(100 * r["p_best"] + 1e-9), 1), 99)) for r in verdict["few_labels"]["estimates"]
    ]
    assert chances["chance it is the best"].tolist() == expected  # whole percents: "95%", as in the report
    assert not [c for c in _cells(at) if RAW.search(c)]  # controls, layers, parameters: no None, no JSON
    assert not at.json  # the parameters are a table, not JSON
    links = [link.label for link in at.get("page_link")]
    offer = [] if verdict["settled"] else ["Check with a few labels"]  # the offer stays here until settled
    assert links == ["How to read this", *offer]
    assert any("device" in c for c in _cells(at))


def test_the_labels_page_shows_the_reason_and_never_links_to_itself(open_page, few_labelled):
    _, run = few_labelled
    at = open_page("dashboard/labels.py")
    assert not [link for link in at.get("page_link") if link.label == "Check with a few labels"]
    assert load_verdict(run)["few_labels"]["advice"]["text"] in page_texts(at)
    assert not [c for c in _cells(at) if RAW.search(c)]


def test_validation_judges_the_map_against_the_few_labels(open_page):
    at = open_page("dashboard/validation.py")
    text = page_texts(at)
    assert "Without labels, the order could not be checked" not in text
    assert "Checked from your 32 labels: the label-free order" in text and "rank correlation" in text
    assert "Labels: 32 given, in 2 batches." in text


def test_a_viewer_is_never_asked_to_label(open_page, few_labelled):
    store, run = few_labelled
    link, _ = shares.create_link(store, run.id, texts=True)
    at = open_page("dashboard/overview.py", {"share": link})
    text = page_texts(at)
    advice = load_verdict(run)["few_labels"]["advice"]
    assert not re.search(r"\blabel (at least |about )?\d+ more texts\b", text, flags=re.I), text
    if advice["settled"]:  # nothing more is asked of anyone
        assert _answer(at).startswith("**Use ") and "more labels would settle it" not in text
    elif advice["more_labels"]:  # the forecast, said as a fact
        assert "labels would settle it" in _answer(at)
        assert "more labels would settle it; the run's owner can add them" in text.replace("&#x27;", "'")
    else:  # too close to settle: no count, and the choice called sound
        assert advice["reason"] == "too close" and "too close to tell apart" in _answer(at)


def test_each_text_of_a_batch_is_shown_whole_beside_its_choices(open_page, few_labelled):
    """The batch's articles (about 2,000 characters each) are shown whole: the first 1,200 characters in
    the text's box, the whole under "Show the whole text"; the box holds its own choices."""
    _, run = few_labelled
    at = open_page("dashboard/labels.py")
    texts = run.corpus_frame()["text"]
    rows = [
        int(re.search(r"row (\d+) of your corpus", c.value).group(1))
        for c in at.caption
        if "of your corpus" in c.value
    ]
    assert len(rows) == 16 and not set(rows) & set(label_store.load_labels(run).latest())
    shown_words = " ".join(page_texts(at).split())
    assert all(" ".join(str(texts[r]).split()) in shown_words for r in rows)  # each text whole
    corrected = list(label_store.load_labels(run).latest())[-1]  # the text "Correct a saved label" shows
    long = [r for r in [*rows, corrected] if len(str(texts[r])) > 1200]
    wholes = [e for e in at.expander if e.label.startswith("Show the whole text")]
    assert len(long) > 8 and len(wholes) == len(long)
    picks = [p for p in at.get("button_group") if p.key and p.key.startswith(f"pick-{run.id}-")]
    assert [int(p.key.rsplit("-", 1)[1]) for p in picks] == rows  # each text's choices, in its order
