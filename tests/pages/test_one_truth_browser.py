"""One screen, one truth: after two batches of labels on a label-free run, every figure the Overview, *Check
with a few labels* and the HTML report show of the answer agrees with the others, in a real headless
Chromium against ``flare app``.

The run is the static fixture (three real static models, 50 BBC News articles, no label column); the
labels are the articles' own topics, given in two batches of 16 of the texts the product asks for, saved
as the page and ``flare label`` save them.
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

import pandas as pd
import pytest

from flare_core.answer.from_labels import next_texts
from flare_core.answer.labels import add_labels, load_labels
from flare_core.answer.stored import load_verdict
from flare_core.answer.write import write_verdict
from flare_core.choosing.stopping import chance_words
from flare_core.store.runs import RunStore
from flare_core.view.report import write_report
from flare_core.view.verdict import interval_words
from tests.pages.app_process import BROWSER_MARKS, headless_chromium, start_app, stop_app

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def labelled_twice(unlabelled_run, tmp_path_factory):
    """A copy of the static fixture with 32 labels in two batches, and its corpus's own topics."""
    from flare_core.data.demo import bbc_news_frame

    base = tmp_path_factory.mktemp("one-truth")
    runs = base / "runs"
    shutil.copytree(unlabelled_run.path, runs / unlabelled_run.id)
    run = RunStore(runs).get(unlabelled_run.id)
    truth = bbc_news_frame(n_per_topic=10, seed=0)["label"].astype(str).tolist()
    assert run.corpus_frame()["text"].tolist() == bbc_news_frame(n_per_topic=10, seed=0)["text"].tolist()
    for _batch in (1, 2):  # what the page and `flare label` do with a batch: save it, then the answer
        rows = next_texts(run, load_labels(run), 16)["row"].tolist()
        add_labels(run, {r: truth[r] for r in rows}, source="file")
        write_verdict(run)
    report = write_report(run, base / "report.html")
    return run, report.read_text(encoding="utf-8")


def _percent(text: str) -> float:
    return float(text.strip().rstrip("%")) / 100.0


class _Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts (the standard library's parser)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _report_labels_table(html: str) -> pd.DataFrame:
    """The report's table of what the labels say (the one with a chance column)."""
    parser = _Tables()
    parser.feed(html)
    tables = [
        pd.DataFrame(t[1:], columns=t[0]) for t in parser.tables if t and "chance it is the best" in t[0]
    ]
    assert len(tables) == 1, "the report shows what the labels say once"
    return tables[0]


def test_one_screen_one_truth(labelled_twice):
    run, report = labelled_twice
    verdict = load_verdict(run)
    few = verdict["few_labels"]
    best = verdict["recommended"]
    assert verdict["basis"] == "few labels" and few["n_labels"] == 32 and few["batches"] == 2
    estimates = pd.DataFrame(few["estimates"]).set_index("model")

    # one estimate: the recommended model has the highest estimate, and a model whose estimate and
    # interval are at least another's never has a smaller chance of being the best
    assert best == estimates["estimate"].idxmax() == few["advice"]["best"]
    for a in estimates.index:
        for b in estimates.index:
            if a != b and (estimates.loc[a, ["estimate", "ci_low", "ci_high"]] >= estimates.loc[b, ["estimate", "ci_low", "ci_high"]]).all():  # fmt: skip
                assert estimates.loc[a, "p_best"] >= estimates.loc[b, "p_best"], (a, b)

    # the cheapest good-enough model is within the run's tolerance of the best with 90% chance, or the
    # sentence says that the labels cannot tell yet
    cost = verdict.get("cost")
    assert cost is not None and cost["best"] == best
    points = few["tolerance_points"]
    assert f"within {points:g} point" in cost["sentence"]
    if cost["model"] != best:
        assert estimates.loc[cost["model"], "p_within"] >= 0.9 and few["advice"]["reason"] in (
            "sure",
            "not sure yet",
            "too close",
        )
    cheaper = [m for m in estimates.index if m != cost["model"]]
    if cost["undecided"] is not None:
        assert "cannot tell yet" in cost["sentence"] and cost["undecided"]["model"] in cheaper

    # the report: the same model, the same figures, the same count of labels
    table = _report_labels_table(report).set_index("model")
    assert list(table.index) == list(estimates.index)  # the answer's order, best first
    for model, row in table.iterrows():
        assert row["chance it is the best"] == chance_words(estimates.loc[model, "p_best"])
        assert _percent(row["estimated accuracy"]) == pytest.approx(
            estimates.loc[model, "estimate"], abs=0.0006
        )
    within = f"chance it is within {points:g} point{'' if points == 1 else 's'} of the best"
    for model, row in table.iterrows():  # the chance of being good enough, at the run's tolerance
        assert row[within] == chance_words(estimates.loc[model, "p_within"])
        assert row["likely between"] == interval_words(
            estimates.loc[model, "ci_low"], estimates.loc[model, "ci_high"]
        )
    # the stopping advice reads the leader's own chance and the posterior's own forecast
    advice = few["advice"]
    if not advice["settled"] and advice["reason"] in ("not sure yet", "too close"):
        assert f"({chance_words(estimates.loc[best, 'p_within'])} chance" in advice["text"]
    if advice["more_labels"] is not None and advice["reason"] != "too close":
        assert f"about {advice['more_labels']} more labels" in advice["text"]
    assert verdict["headline"] in report and cost["sentence"] in report
    assert re.search(r"\b32 labels\b", report) and "32 given, in 2 batches" in report  # the run line

    proc, url = start_app(run.path.parent)
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            page.goto(f"{url}/?run={run.id}", wait_until="domcontentloaded", timeout=60_000)
            overview = page.locator(".st-key-page-verdict")
            overview.wait_for(timeout=90_000)
            page.get_by_text(verdict["headline"][:60]).first.wait_for(timeout=60_000)
            page.get_by_text("labels: 32 given, in 2 batches").first.wait_for(timeout=60_000)  # the run line
            shown = overview.inner_text()
            assert verdict["headline"] in shown and cost["sentence"] in shown
            page.get_by_text("Details: how this answer was reached").first.click()  # the advice's reason
            page.get_by_text(few["advice"]["text"][:60]).first.wait_for(timeout=30_000)
            assert few["advice"]["text"] in overview.inner_text()
            names = {m for m in estimates.index if m in verdict["headline"]}
            assert names == {best} | set(verdict["tied_with"])  # one best on the screen

            page.goto(f"{url}/labels?run={run.id}", wait_until="domcontentloaded", timeout=60_000)
            box = page.locator(".st-key-labels-verdict")
            box.wait_for(timeout=90_000)
            page.get_by_text(verdict["headline"][:60]).first.wait_for(timeout=60_000)
            assert verdict["headline"] in box.inner_text()
            page.get_by_text("32 texts labelled so far in 2 batch(es)").wait_for(timeout=60_000)
    finally:
        stop_app(proc)
