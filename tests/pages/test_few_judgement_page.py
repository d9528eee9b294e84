"""*Check with a few labels* for search, through Streamlit's AppTest on a label-free run of real static
models: a query typed and added, its pooled documents listed without saying which model found which, the
answer from the judgements shown on the same page, and nothing on screen reads 'None', 'nan' or JSON. The
page speaks of searches (its title, its opening) and shows each pooled document whole beside its box."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flare_core.answer import few_judgements as fj
from flare_core.store.runs import RunStore
from tests.support import page_texts

APP = str(Path(__file__).resolve().parents[2] / "app.py")
pytestmark = pytest.mark.slow
RAW = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|\bnull\b|NULL|\{\"|\[\{")


def test_a_typed_query_is_pooled_judged_and_answered_on_the_page(tmp_path, unlabelled_run, monkeypatch):
    store = RunStore(tmp_path / "runs")
    shutil.copytree(unlabelled_run.path, store.root / unlabelled_run.id)
    run = store.get(unlabelled_run.id)
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    for name in ("FLARE_OWNER_TOKEN", "FLARE_VIEWER_ONLY", "FLARE_OWNER_EMAILS"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = run.id
    at.run()
    at.switch_page("dashboard/labels.py").run()
    assert at.title[0].value == "Check with a few labels"
    at.radio(key=f"mode-{run.id}").set_value("search queries").run()
    assert at.title[0].value == "Check with a few searches"
    assert "Add a query to start." in page_texts(at) and "Name the categories" not in page_texts(at)
    at.text_input(key=f"query-{run.id}").input("the football team won the match").run()
    at.button(key="add-query").click().run()
    assert not at.exception, [e.value for e in at.exception]
    judged = fj.load_search_judgements(run)
    assert judged.ids == ["q1"] and judged.queries["source"].tolist() == ["typed"]
    boxes = _pool_boxes(at, run.id)
    assert list(boxes) == judged.shown("q1") and not any(boxes.values())  # the top within 15, in order
    assert len(boxes) <= fj.POOL_SHOWN < len(judged.pool("q1"))
    texts = run.corpus_frame()["text"]
    shown_words = " ".join(page_texts(at).split())
    assert all(" ".join(str(texts[r]).split()) in shown_words for r in boxes)  # each whole, under Show all
    assert "does not say which model found which" in page_texts(at)
    # judged as the page's save button does; the list then shows them ticked, saving it again changes
    # nothing, and the page shows the answer from the judgements
    fj.add_judgements(run, [("q1", r, int("sport" in texts[r].lower() or "match" in texts[r].lower()))
                            for r in judged.shown("q1")])  # fmt: skip
    at.run()
    latest = fj.load_search_judgements(run).latest()["q1"]
    assert {r: int(v) for r, v in _pool_boxes(at, run.id).items()} == latest
    at.button(key="save-judgements").click().run()
    assert fj.load_search_judgements(run).batches == 1
    text = page_texts(at)
    assert (
        "1 judged query is too few to judge by yet" in text
        and "judge at least 19 more queries" in text.lower()
    )
    assert not RAW.search(text), RAW.search(text)
    assert "From your judgements so far" in text and "From your labels so far" not in text


def _pool_boxes(at, run_id: str) -> dict[int, bool]:
    """The pooled documents' boxes of query q1 on the page: each document's row and whether it is ticked."""
    return {
        int(box.key.rsplit("-", 1)[1]): box.value
        for box in at.checkbox
        if box.key and box.key.startswith(f"pool-{run_id}-q1-")
    }
