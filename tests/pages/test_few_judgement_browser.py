"""The whole few-judgement task in a real headless Chromium against ``flare app``: on a label-free search run
of real static models, type 3 queries, tick relevant documents in each query's pooled list and save; see the
answer and its chances change; kill the server (the judgements and the answer stay in its store), carry the
run in a bundle to another store, start a server there and find the judgements and the same answer."""

from __future__ import annotations

import contextlib
import dataclasses
import signal

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from flare_core.answer import few_judgements as fj
from flare_core.answer.stored import load_verdict
from flare_core.data.corpus import load_corpus
from flare_core.data.demo import bbc_news_frame
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store.runs import RunStore
from tests.pages.app_process import BROWSER_MARKS, ROOT, headless_chromium, start_app, stop_app
from tests.support import embeddings_params, flare_here

SHOTS = ROOT / "test-output" / "screenshots"
pytestmark = BROWSER_MARKS
QUERIES = (
    "the football team won the match",
    "the election and the prime minister",
    "new mobile phone software",
)


def _open(page, url: str, run_id: str) -> None:
    page.goto(f"{url}/labels?run={run_id}", wait_until="domcontentloaded", timeout=60_000)
    page.get_by_text("1. Your queries").wait_for(timeout=90_000)


def _answer(page) -> str:
    box = page.locator(".st-key-labels-verdict")
    box.wait_for(timeout=60_000)
    return box.inner_text()


def _tick(page, query: str, rows: list[int]) -> None:
    """Tick the box of the pooled list's documents ``rows`` (positions), each until the save button counts
    it. A toggle is not idempotent, so a tick is made again only while the page still counts one fewer once
    it has settled (a busy machine missed the click)."""
    for count, position in enumerate(rows, start=1):
        counted = page.get_by_role("button", name=f"Save the judgements of {query} ({count} relevant)")
        fewer = page.get_by_role("button", name=f"Save the judgements of {query} ({count - 1} relevant)")
        for _attempt in range(3):
            page.get_by_text(f"Document {position + 1} answers the query", exact=True).click()
            with contextlib.suppress(PlaywrightTimeout):
                counted.wait_for(timeout=45_000)
                break
            if not fewer.is_visible():
                break
        if not counted.is_visible():
            page.screenshot(path=str(SHOTS / "judgements-tick-missed.png"), full_page=True)
            raise AssertionError(f"the relevant box of row {position} of {query} could not be ticked")


def _reads_passages(page, run, query: str) -> None:
    """The query asks for at most 15 documents, each as a passage shorter than the article with the whole
    article under "Show all"; every document the models found is one click away."""
    judged = fj.load_search_judgements(run)
    shown, found = judged.shown(query), judged.pool(query)
    boxes = page.locator("[class*='st-key-pooled-']")
    assert boxes.count() == len(shown) and 5 <= len(shown) <= fj.POOL_SHOWN
    assert shown == found if len(found) <= fj.POOL_SHOWN else set(shown) < set(found)
    texts = run.corpus_frame()["text"]
    for n, row in enumerate(shown):
        box = boxes.nth(n)
        assert f"row {row} of your corpus" in box.inner_text()
        words = len(box.locator("[data-testid='stMarkdownContainer']").nth(1).inner_text().split())
        assert words <= 47 < len(str(texts[row]).split())  # a passage (with its "…"), not the article
        assert box.get_by_text("Show all").count() == 1
    more = page.get_by_role("button", name=f"Show all {len(found)} documents the models found")
    assert more.count() == (len(found) > len(shown))


def test_judge_three_queries_restart_and_carry_them_in_a_bundle(tmp_path):
    articles = bbc_news_frame(n_per_topic=6, seed=1)
    articles[["text"]].to_csv(tmp_path / "articles.csv", index=False)
    params = dataclasses.replace(embeddings_params(), geometry=False, use="search")
    run = create_run(
        RunStore(tmp_path / "runs"), load_corpus(tmp_path / "articles.csv", text_column="text"), params
    )
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    runs_dir = run.path.parent
    SHOTS.mkdir(parents=True, exist_ok=True)
    chances = []
    proc, url = start_app(runs_dir)
    try:
        with headless_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 2600})
            _open(page, url, run.id)
            for n, text in enumerate(QUERIES, start=1):
                query = f"q{n}"
                page.get_by_role("textbox", name="Type a query").fill(text)
                page.keyboard.press("Enter")
                page.get_by_role("button", name="Add the query").click()
                page.get_by_role("button", name=f"Save the judgements of {query} (0 relevant)").wait_for(
                    timeout=90_000
                )
                assert page.get_by_role("textbox", name="Type a query").input_value() == ""  # added, gone
                _reads_passages(page, run, query)
                _tick(page, query, [0, 1] if n != 2 else [1, 2, 3])
                page.get_by_role("button", name=f"Save the judgements of {query}").click()
                words = f"{n} judged quer{'y is' if n == 1 else 'ies are'} too few to judge by yet"
                page.locator(".st-key-labels-verdict").get_by_text(words).first.wait_for(timeout=90_000)
                picker = page.locator("[class*='st-key-judge-query-']")  # it stays on the query just judged
                picker.locator(f"input[value='{query}: {text} (judged)']").first.wait_for(timeout=60_000)
                verdict = load_verdict(run)
                assert verdict["headline"] in _answer(page)
                chances.append({r["model"]: r["p_best"] for r in verdict["few_labels"]["estimates"]})
            judged = fj.load_search_judgements(run)
            assert judged.ids == ["q1", "q2", "q3"] and len(judged.counted) == 3
            assert sum(sum(d.values()) for d in judged.latest().values()) == 7  # the boxes ticked
            assert chances[0] != chances[-1]  # the answer's chances moved as queries were judged
            after = load_verdict(run)
            page.screenshot(path=str(SHOTS / "judgements-after-3.png"), full_page=True)

            stop_app(proc, signal.SIGKILL)  # the server dies; the judgements were saved with the run
            assert fj.load_search_judgements(run).latest() == judged.latest() and load_verdict(run) == after

            bundle = tmp_path / "bundle.zip"
            flare_here("export", run.id, "-o", str(bundle), runs_dir=runs_dir)
            elsewhere = tmp_path / "elsewhere"
            flare_here("import", str(bundle), runs_dir=elsewhere)
            proc, url = start_app(elsewhere)  # a server started after the kill reads them from the bundle
            _open(page, url, run.id)
            assert after["headline"] in _answer(page)
    finally:
        stop_app(proc)
    assert fj.load_search_judgements(RunStore(elsewhere).get(run.id)).latest() == judged.latest()
