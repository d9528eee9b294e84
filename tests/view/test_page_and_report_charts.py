"""One stored run drawn both ways: every chart the HTML report shares with a dashboard page has the same
plotly data and layout in both (the page's spec as Streamlit sends it, the report's as its HTML holds it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flare_core.view.report import build_report

APP = str(Path(__file__).resolve().parents[2] / "app.py")
pytestmark = pytest.mark.slow

# page -> the report's figure ids of the page's first charts, in the order the page draws them
CHARTS = {
    "dashboard/sufficiency.py": ["is-ranking-flow", "is-heatmap-flow", "is-graph-flow"],
    "dashboard/collapse.py": ["socm-distribution", "collapse-scatter-0"],
    "dashboard/validation.py": ["correlations-heatmap"],
}


def _report_specs(page: str) -> dict[str, dict]:
    """``{div id: {"data", "layout"}}`` of every ``Plotly.newPlot`` call in a report."""
    decoder = json.JSONDecoder()
    specs = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, match.end())
        rest = page[end:]
        layout, _ = decoder.raw_decode(rest, len(rest) - len(rest.lstrip().removeprefix(",").lstrip()))
        specs[match.group(1)] = {"data": data, "layout": layout}
    return specs


def _page_specs(page: str, run, monkeypatch, store) -> list[dict]:
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = run.id
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


@pytest.fixture(scope="module")
def report_specs(labelled_run) -> dict[str, dict]:
    # the report draws as many points as the collapse page does by default
    return _report_specs(build_report(labelled_run))


@pytest.mark.parametrize("page", sorted(CHARTS))
def test_the_page_and_the_report_draw_the_same_charts(
    page, labelled_run, fixture_store, monkeypatch, report_specs
):
    shown = _page_specs(page, labelled_run, monkeypatch, fixture_store)
    assert len(shown) >= len(CHARTS[page]), f"{page} drew {len(shown)} charts"
    for spec, div in zip(shown, CHARTS[page], strict=False):
        assert spec["data"] == report_specs[div]["data"], f"{page} vs {div}: data"
        assert spec["layout"] == report_specs[div]["layout"], f"{page} vs {div}: layout"


def test_the_layer_curves_match_metric_by_metric(labelled_run, fixture_store, monkeypatch, report_specs):
    # the page lays its curves out in two columns, so they are matched by their metric (the title)
    shown = {
        spec["layout"]["title"]["text"]: spec
        for spec in _page_specs("dashboard/layers.py", labelled_run, monkeypatch, fixture_store)
    }
    curves = {
        spec["layout"]["title"]["text"]: spec
        for div, spec in report_specs.items()
        if div.startswith("concentration-")
    }
    assert len(shown) >= 3 and shown.keys() == curves.keys()
    for metric, spec in shown.items():
        assert spec["data"] == curves[metric]["data"], metric
        assert spec["layout"] == curves[metric]["layout"], metric


def test_the_report_draws_every_shared_chart(report_specs):
    wanted = {div for divs in CHARTS.values() for div in divs}
    assert wanted <= set(report_specs), sorted(wanted - set(report_specs))
    # the palettes and iso-lines are the page's: Inferno, and iso-SOCM lines at three percentiles
    scatter = report_specs["collapse-scatter-0"]["data"]
    assert scatter[0]["marker"]["colorscale"][0][1] == "#000004"  # Inferno starts at #000004
    assert sum(trace["name"].startswith("collapse ") for trace in scatter) == 3


def test_the_overview_and_the_report_draw_the_same_quality_cost_chart(
    labelled_run, fixture_store, monkeypatch, report_specs
):
    shown = [
        spec
        for spec in _page_specs("dashboard/overview.py", labelled_run, monkeypatch, fixture_store)
        if spec["layout"]["title"]["text"].startswith("Quality against speed")
    ]
    assert len(shown) == 1
    assert shown[0]["data"] == report_specs["quality-cost-speed"]["data"]
    assert shown[0]["layout"] == report_specs["quality-cost-speed"]["layout"]
