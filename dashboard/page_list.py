"""The dashboard's pages, in the order of the navigation: the one list that ``app.py``, the page tests and
``bench/speed/page_render.py`` read. Plain data (no Streamlit), so that a test or a bench script can import
it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageSpec:
    """One page: its script ``path``, ``title`` and ``icon`` in the navigation, its ``section`` ("Analyse",
    "Runs" or "Help"), and ``needs``: the access action a session must be allowed to see it (None: every
    session that may open a run sees it)."""

    path: str
    title: str
    icon: str
    section: str
    needs: str | None = None
    default: bool = False


PAGES = (
    PageSpec("dashboard/overview.py", "Overview", ":material/insights:", "Analyse", default=True),
    PageSpec("dashboard/labels.py", "Check with a few labels", ":material/label:", "Analyse", needs="label"),
    PageSpec("dashboard/sufficiency.py", "Information sufficiency", ":material/hub:", "Analyse"),
    PageSpec("dashboard/corpus.py", "Corpus & embedding map", ":material/scatter_plot:", "Analyse"),
    PageSpec("dashboard/collapse.py", "Mean-pooling collapse", ":material/compress:", "Analyse"),
    PageSpec("dashboard/layers.py", "Layer-wise concentration", ":material/stacked_line_chart:", "Analyse"),
    PageSpec("dashboard/validation.py", "Validation", ":material/fact_check:", "Analyse"),
    PageSpec("dashboard/new_run.py", "New run", ":material/add_circle:", "Runs", needs="start"),
    PageSpec("dashboard/runs.py", "Runs", ":material/history:", "Runs", needs="list"),
)
#: The help pages, beside the others in every session's menu: they show the docs, no run.
HELP_PAGES = (
    PageSpec("dashboard/how_to_read.py", "How to read your answer", ":material/help:", "Help"),
    PageSpec("dashboard/glossary.py", "Glossary", ":material/menu_book:", "Help"),
)
#: The pages every session that may open a run sees, a share link's included: the analyses of one run.
SHARED_PAGES = tuple(p.path for p in PAGES if p.needs is None)
#: The pages drawn from a stored run alone (no form to fill): the shared pages and the list of runs.
STORED_RUN_PAGES = tuple(p.path for p in PAGES if p.needs in (None, "list"))


def url_path(path: str) -> str:
    """The address of the page ``path`` under the app's root: empty for the default page, else the
    script's name without ``.py`` (as ``st.Page`` names it)."""
    spec = next((p for p in PAGES + HELP_PAGES if p.path == path), None)
    if spec is None:
        raise ValueError(f"not a page of the dashboard: {path!r}")
    return "" if spec.default else path.rsplit("/", 1)[-1].removesuffix(".py")
