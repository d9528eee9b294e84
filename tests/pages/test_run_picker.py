"""The sidebar's run picker: it follows a run just started, and otherwise keeps the person's choice."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.slow


def _sidebar() -> None:
    import streamlit as st

    from dashboard.common import run_picker
    from dashboard.session import session_access

    session_access()  # as app.py does first: this machine only, so the owner
    with st.sidebar:
        run_picker()


def test_picker_moves_to_a_started_run_and_then_keeps_the_choice(
    fixture_store, monkeypatch, unlabelled_run, failed_run
):
    monkeypatch.setenv("FLARE_RUNS_DIR", str(fixture_store.root))
    at = AppTest.from_function(_sidebar, default_timeout=60)
    at.query_params["run"] = unlabelled_run.id
    at.run()
    picker = at.sidebar.selectbox(key="run_picker")
    assert picker.value == unlabelled_run.id
    picker.set_value(failed_run.id).run()  # chosen by hand: the link follows the picker
    assert at.sidebar.selectbox(key="run_picker").value == failed_run.id
    assert at.query_params["run"] == failed_run.id

    at.session_state["follow-run"] = unlabelled_run.id  # what the New run page leaves after Start
    at.run()
    assert not at.exception and not at.warning
    assert at.sidebar.selectbox(key="run_picker").value == unlabelled_run.id
    assert at.query_params["run"] == unlabelled_run.id and at.session_state["run_id"] == unlabelled_run.id
    at.run()  # an ordinary rerun keeps it
    assert at.sidebar.selectbox(key="run_picker").value == unlabelled_run.id
