"""The self-contained HTML report: one inlined plotly.js, escaping everywhere, optional texts, missing data."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.offline
import pytest

from flare_core.answer.stored import VERDICT_FILE
from flare_core.store.runs import Run, RunStore, safe_name
from flare_core.view import results as results_module
from flare_core.view.report import ReportError, build_report, write_report

EVIL = "<script>alert(1)</script>"
EVIL_MODEL = f"evil{EVIL}"
MODELS = ["all-MiniLM-L6-v2", "glove-6b-50d", EVIL_MODEL]
TEXTS = [f"Corpus text number {i} about a distinctive topic {i * 7} here." for i in range(11)] + [
    f"A corpus text with markup {EVIL} inside"
]


def _plotlyjs_count(text: str) -> int:
    return text.count(plotly.offline.get_plotlyjs())


def _fake_sufficiency(run: Run, estimator: str):
    """The frames ``results.sufficiency_frames`` returns, for a hand-built run (no trained estimator)."""
    if not run.has("fake_sufficiency.json") or estimator != "flow":
        return None
    rng = np.random.default_rng(1)
    values = pd.DataFrame(rng.uniform(0, 1, size=(3, 3)), index=MODELS, columns=MODELS)
    for m in MODELS:
        values.loc[m, m] = np.nan
    scores = pd.DataFrame(
        {"model": MODELS, "score": [0.8, 0.5, 0.2], "ci_low": [0.7, 0.4, 0.1], "ci_high": [0.9, 0.6, 0.3]}
    )
    scores["rank"] = [1, 2, 3]
    pairs = values.stack().rename("is_per_dim").reset_index()
    pairs.columns = ["source", "target", "is_per_dim"]
    return {
        "scores": scores,
        "all_scores": pd.DataFrame(),
        "controls": pd.DataFrame(),
        "is_matrix": values * 10,
        "is_per_dim": values,
        "pairs": pairs,
    }


@pytest.fixture
def hand_run(tmp_path, monkeypatch) -> Run:
    """A finished run with every artefact a report shows, built by hand (fast)."""
    monkeypatch.setattr(results_module, "sufficiency_frames", _fake_sufficiency)
    n = len(TEXTS)
    manifest = {
        "name": f"report {EVIL}",
        "status": "done",
        "corpus": {"source_name": "c.csv", "n_texts": n, "has_labels": True, "label_column": "label"},
        "models": [
            {"id": m, "role": "candidate", "status": "done", "dim": 4, "encoder_kind": "transformer"}
            for m in MODELS
        ],
        "params": {"models": MODELS, "seed": 3, "collapse_texts": n},
        "versions": {"python": "3.11", "numpy": np.__version__},
        "seeds": {"global": 3},
        "timings": {"embeddings": 1.5, "collapse": 0.25},
    }
    run = RunStore(tmp_path / "runs").create(manifest, run_id="hand")
    run.save_frame(
        pd.DataFrame({"id": range(n), "text": TEXTS, "label": ["a", "b"] * (n // 2)}), "corpus.parquet"
    )
    run.save_json({}, "fake_sufficiency.json")
    run.save_frame(
        pd.DataFrame(
            {
                "model": MODELS,
                "role": "candidate",
                "dim": 4,
                "flow_score": [0.8, 0.5, 0.2],
                "flow_rank": [1, 2, 3],
            }
        ),
        "summary.parquet",
    )
    rng = np.random.default_rng(0)
    rows, collapse_summary = [], []
    i, j = np.triu_indices(n, k=1)
    for m in MODELS[::2]:
        d_mu, d_sigma = rng.uniform(0, 0.5, len(i)), rng.uniform(0, 0.3, len(i))
        frame = pd.DataFrame({"i": i, "j": j, "d_mu": d_mu, "d_sigma": d_sigma, "socm": (1 - d_mu) * d_sigma})
        frame["row_i"], frame["row_j"] = i, j
        run.save_frame(frame, "collapse", f"{safe_name(m)}.parquet")
        collapse_summary.append({"model": m, "socm_mean": float(frame["socm"].mean())})
    run.save_frame(pd.DataFrame(collapse_summary), "collapse", "summary.parquet")
    for layer in range(4):
        for m in MODELS[::2]:
            rows.append(
                {"model": m, "layer": layer, "concentration": rng.uniform(), "mean_cos": rng.uniform()}
            )
    run.save_frame(pd.DataFrame(rows), "concentration.parquet")
    run.save_frame(pd.DataFrame({"model": MODELS, "uniformity": [-2.0, -1.5, -1.0]}), "geometry.parquet")
    run.save_frame(pd.DataFrame({"model": MODELS, "knn_accuracy": [0.9, 0.7, 0.5]}), "downstream.parquet")
    run.save_frame(
        pd.DataFrame(
            {
                "label_free": ["flow_score"],
                "downstream": ["knn_accuracy"],
                "n_models": [3],
                "spearman_rho": [1.0],
            }
        ),
        "correlations.parquet",
    )
    return run


def _check_common(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert _plotlyjs_count(page) == 1
    assert page.count("<script") == page.count("</script>")
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, flags=re.IGNORECASE)
    assert EVIL not in page


# -- hand-built run (fast) ------------------------------------------------------------------------------------


def test_report_of_a_full_run(hand_run, tmp_path):
    page = build_report(hand_run)
    _check_common(page)
    for model in MODELS[:2]:
        assert model in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the model name, the run name, a text: escaped
    assert 'id="is-heatmap-flow"' in page and 'id="is-graph-flow"' in page
    assert 'id="collapse-scatter-0"' in page and 'id="concentration-0"' in page
    assert "Recommended model: <strong>all-MiniLM-L6-v2</strong>" in page
    assert "knn_accuracy" in page and "uniformity" in page and "spearman" in page.lower()
    assert TEXTS[0] in page  # most-collapsed pairs show their texts
    assert "EMIR (Gaussian mixtures): not computed in this run" in page
    out = write_report(hand_run, tmp_path)
    assert out == tmp_path / "hand-report.html" and out.read_text(encoding="utf-8").startswith(
        "<!DOCTYPE html>"
    )


def test_report_without_texts(hand_run):
    page = build_report(hand_run, include_texts=False)
    _check_common(page)
    for text in TEXTS:
        assert text not in page
        assert text[:40] not in page
    assert "leaves out the corpus texts" in page


def test_verdict_text_is_used_and_escaped(hand_run):
    hand_run.save_json({"text": f"Use {EVIL_MODEL}."}, VERDICT_FILE)
    page = build_report(hand_run)
    assert "Use evil&lt;script&gt;alert(1)&lt;/script&gt;." in page
    assert EVIL not in page


def test_verdict_of_schema_2_shows_headline_trust_and_checks_escaped(hand_run):
    from flare_core.answer.trust import Check, TrustAssessment
    from flare_core.answer.verdict import verdict

    scores = pd.DataFrame(
        {"model": [EVIL_MODEL, "glove"], "score": [0.3, 0.1], "ci_low": [0.25, 0.05], "ci_high": [0.35, 0.15]}
    )
    trust = TrustAssessment(
        "low", [Check("pool", "fail", "2 candidates", "Two candidates are too few.", 2.0)]
    )
    hand_run.save_json(verdict(scores, estimator="flow", trust=trust), VERDICT_FILE)
    page = build_report(hand_run)
    assert (
        '<p class="recommendation error"><strong>The label-free ranking cannot be trusted on this corpus.</strong>'
        in page
    )
    assert (
        "Label-free ranking, trust: low" in page
        and "Two candidates are too few." in page
        and "Enough candidates to compare" in page
    )
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt; leads the ranking" in page
    assert EVIL not in page


def test_scatter_is_sampled(hand_run):
    small = build_report(hand_run, max_scatter_points=10)
    assert "pairs (10 of 66)" in small


def test_report_of_an_almost_empty_run(tmp_path):
    run = RunStore(tmp_path).create(
        {
            "name": "bare",
            "status": "failed",
            "error": "RuntimeError: boom",
            "corpus": {},
            "models": [],
            "params": {},
        }
    )
    page = build_report(run)
    _check_common(page)
    assert "This run failed: RuntimeError: boom" in page
    assert page.count("not computed in this run") >= 5


def test_validation(hand_run, tmp_path):
    with pytest.raises(ReportError, match="expects a Run"):
        build_report(str(hand_run.path))
    with pytest.raises(ReportError, match="max_scatter_points"):
        build_report(hand_run, max_scatter_points=0)
    with pytest.raises(ReportError, match="include_texts"):
        build_report(hand_run, include_texts="no")
    with pytest.raises(ReportError, match="no manifest"):
        build_report(Run(tmp_path / "nothing"))


# -- runs built by the real pipeline --------------------------------------------------------------------------


@pytest.mark.slow
def test_labelled_fixture_report(labelled_run, tmp_path):
    path = write_report(labelled_run, tmp_path / "labelled.html")
    page = path.read_text(encoding="utf-8")
    _check_common(page)
    summary = labelled_run.load_frame("summary.parquet")
    for model in summary["model"]:
        assert model in page
    assert 'id="is-heatmap-flow"' in page and 'id="is-heatmap-gmm"' in page
    size = Path(path).stat().st_size
    print(f"labelled fixture report: {size / 2**20:.2f} MiB")
    assert size < 15 * 2**20

    stripped = build_report(labelled_run, include_texts=False)
    texts = labelled_run.corpus_frame()["text"].tolist()
    for text in texts[:: max(1, len(texts) // 8)]:
        assert text not in stripped
        assert " ".join(text.split())[:60] not in stripped


@pytest.mark.slow
def test_unlabelled_and_failed_fixture_reports(unlabelled_run, failed_run):
    page = build_report(unlabelled_run)
    _check_common(page)
    assert "Mean-pooling collapse (SOCM; it needs a transformer model): not computed in this run" in page
    assert "Downstream scores (they need labels or pairs): not computed in this run" in page
    assert "Correlations of label-free scores with downstream scores (they need labels): not computed" in page

    page = build_report(failed_run)
    _check_common(page)
    assert "This run failed" in page
    assert "Information sufficiency: not computed in this run" in page
