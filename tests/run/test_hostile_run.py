"""A real run with hostile names and texts and a model that cannot be loaded: the run finishes without the
broken model, and every name and text is escaped in its report and its CSV exports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store.export import safe_csv
from flare_core.store.runs import RunStore
from flare_core.view.results import run_results
from tests.support import EVIL, IMG, fast_params


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, small_corpus_path):
    folder = tmp_path_factory.mktemp("hostile")
    frame = pd.read_csv(small_corpus_path)
    frame.loc[0, "text"] = f"{EVIL} {frame.loc[0, 'text']}"
    frame.loc[1, "text"] = f"{IMG} {frame.loc[1, 'text']}"
    frame.loc[2, "text"] = f"=cmd|' /C calc'!A0 {frame.loc[2, 'text']}"
    path = folder / f"corpus {IMG}.csv"
    frame.to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column="label")
    assert corpus.texts[0].startswith(EVIL) and corpus.texts[1].startswith(IMG)
    noise = np.random.default_rng(0).normal(size=(len(corpus), 8)).astype(np.float32)
    store = RunStore(folder / "runs")
    params = fast_params(["glove-6b-50d", "no-such-org/no-such-model"])
    run = create_run(store, corpus, params, name=f"run {EVIL}", precomputed={f"noise{EVIL}": noise})
    status = jobs.run_in_process(run)
    return run, status


@pytest.mark.slow
def test_a_model_that_fails_to_load_does_not_sink_the_run(hostile_run):
    run, status = hostile_run
    assert status == "done", run.manifest.get("traceback")
    models = {m["id"]: m for m in run.manifest["models"]}
    broken = models["no-such-org/no-such-model"]
    assert broken["status"] == "failed" and broken["error"]
    assert models["glove-6b-50d"]["status"] == models[f"noise{EVIL}"]["status"] == "done"
    results = run_results(run)
    ranked = {row["model"] for row in results["sufficiency"]["gmm"]["scores"]}
    assert ranked == {"glove-6b-50d", f"noise{EVIL}"}
    assert "no-such-org/no-such-model" not in results["sufficiency"]["gmm"]["is_matrix"]["sources"]
    assert all(np.isfinite(row["score"]) for row in results["sufficiency"]["gmm"]["scores"])


@pytest.mark.slow
def test_html_in_texts_names_and_models_is_escaped_in_the_report(hostile_run):
    from flare_core.view.report import build_report

    run, _ = hostile_run
    for include_texts in (True, False):
        page = build_report(run, include_texts=include_texts)
        assert EVIL not in page and IMG not in page
        assert "alert(1)</script>" not in page
        assert "noise&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the model name, escaped
        assert "run &lt;script&gt;alert(1)&lt;/script&gt;" in page  # the run name, escaped
        assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the corpus file name, escaped
        assert page.count("<script") == page.count("</script>")
    exported = safe_csv(run.corpus_frame()).decode("utf-8")
    assert "'=cmd|' /C calc'!A0" in exported
