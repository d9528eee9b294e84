"""The findings box every analysis page opens with: what the page found on this run, in two lines."""

from __future__ import annotations

import streamlit as st

from dashboard.common import VERDICT_KEY, escape
from flare_core.view.findings import Finding


def finding_box() -> st.delta_generator.DeltaGenerator:
    """An empty box at the current place of the page, to be filled by :func:`show_finding` once the
    figures it speaks of are loaded."""
    return st.container(key=VERDICT_KEY)


def show_finding(finding: Finding, box: st.delta_generator.DeltaGenerator | None = None) -> None:
    """The headline in bold and the detail under it, in ``box`` (a new one at the current place when
    None)."""
    with box if box is not None else finding_box():
        text = f"**{escape(finding.headline)}**"
        if finding.detail:
            text += f"  \n{escape(finding.detail)}"
        st.info(text, icon=":material/lightbulb:")
