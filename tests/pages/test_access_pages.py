"""The dashboard's doors, through Streamlit's AppTest: the owner's token (in the address or typed), a
login through an identity provider, the plain refusal, and a "figures only" link that receives no corpus
text from any page, even after the owner's session has filled the shared caches with them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.page_list import SHARED_PAGES as PAGES
from flare_core.store import shares
from flare_core.store.runs import RunStore

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TOKEN = "the-owner-token-of-this-test-server"
pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path, monkeypatch, labelled_run):
    """A store holding a copy of the labelled fixture run (its links stay out of the shared fixture)."""
    store = RunStore(tmp_path / "runs")
    shutil.copytree(labelled_run.path, store.root / labelled_run.id)
    monkeypatch.setenv("FLARE_RUNS_DIR", str(store.root))
    for name in ("FLARE_OWNER_TOKEN", "FLARE_VIEWER_ONLY", "FLARE_OWNER_EMAILS"):
        monkeypatch.delenv(name, raising=False)
    return store


def _app(params: dict[str, str] | None = None, user: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if user is not None:
        at.user = user
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _submit(at: AppTest, token: str) -> None:
    """Type ``token`` into the owner-token field and press Open (one run: the form sends both at once)."""
    at.text_input[0].input(token)
    at.button[0].click()
    at.run()


def _opens_nothing(at: AppTest) -> bool:
    """Whether asking for an analysis page leaves the session on the refusal (no page is registered)."""
    try:
        at.switch_page("dashboard/corpus.py").run()
    except ValueError:
        return True
    return [t.value for t in at.title] == ["FLARE Studio"] and not at.dataframe


def _is_owner(at: AppTest) -> bool:
    at.switch_page("dashboard/runs.py").run()  # only the owner has a Runs page
    return [t.value for t in at.title] == ["Runs"]


def test_the_owner_gets_in_with_the_token_and_no_one_else(store, monkeypatch):
    at = _app()
    assert _is_owner(at)  # listening on this machine only, no token set: as before
    assert all("owner" not in link for link in at.dataframe[-1].value["link"])
    monkeypatch.setenv("FLARE_OWNER_TOKEN", TOKEN)
    at = _app()
    assert [t.value for t in at.title] == ["FLARE Studio"] and not at.sidebar.selectbox
    assert [i.value for i in at.info] == ["This dashboard opens with a share link from its owner."]
    at = _app({"owner": "a-wrong-token-of-the-same-size-x"})
    assert [e.value for e in at.error] == [
        "This link is not valid. Ask the person who shared it for a new one."
    ]
    _submit(at, "another-wrong-token")
    assert "This token is not valid." in [e.value for e in at.error] and "owner" not in at.query_params
    assert _opens_nothing(at)
    _submit(at, TOKEN)
    assert at.query_params["owner"] == TOKEN and _is_owner(at)  # a reload keeps the owner in
    at = _app({"owner": TOKEN})
    assert _is_owner(at)
    links = (
        at.dataframe[-1].value["link"].tolist()
    )  # the Runs table's links open new tabs: the token goes along
    assert links and all(link.endswith(f"&owner={TOKEN}") for link in links)


def test_an_identity_provider_login_opens_it_to_the_listed_owners_only(store, monkeypatch):
    monkeypatch.setenv("FLARE_OWNER_TOKEN", TOKEN)
    monkeypatch.setenv("FLARE_OWNER_EMAILS", "someone@example.org, Owner@Example.org")
    assert _is_owner(_app(user={"is_logged_in": True, "email": "owner@example.org"}))
    for user in ({"is_logged_in": True, "email": "stranger@example.org"}, {"is_logged_in": False}):
        at = _app(user=user)
        assert [t.value for t in at.title] == ["FLARE Studio"] and [b.label for b in at.button] == [
            "Log in",
            "Open",
        ]


def _received(at: AppTest) -> bytes:
    """Every element the session was sent, as the bytes of its protobuf (tables as Arrow, charts as JSON)."""
    found = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "SerializeToString"):
            found.append(proto.SerializeToString())
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return b"".join(found)


def _snippets(texts: list[str]) -> list[bytes]:
    found = (re.search(r"[A-Za-z][A-Za-z ]{22}[A-Za-z]", t) for t in texts)
    return [m.group(0).encode() for m in found if m]


def test_a_figures_only_link_receives_no_corpus_text(store, labelled_run):
    snippets = _snippets(labelled_run.corpus_frame()["text"].tolist())
    assert len(snippets) >= 40
    with_texts, _ = shares.create_link(store, labelled_run.id, texts=True)
    figures_only, _ = shares.create_link(store, labelled_run.id, texts=False)
    owner = _app({"run": labelled_run.id})
    for page in PAGES:  # the owner first: the shared caches then hold the texts
        owner.switch_page(page).run()
    seen = {}
    for name, params in (("owner", {"run": labelled_run.id}), ("texts", {"share": with_texts}),
                         ("figures", {"share": figures_only, "run": labelled_run.id})):  # fmt: skip
        blob, at = b"", _app(params)  # one session goes through every page, as its person would
        for page in PAGES:
            at.switch_page(page).run()
            assert not at.exception, [e.value for e in at.exception]
            assert [t.value for t in at.title] != ["FLARE Studio"], (name, page)  # the page itself opened
            blob += _received(at)
        seen[name] = sum(1 for s in snippets if s in blob)
    assert seen["figures"] == 0
    assert seen["owner"] > 0 and seen["texts"] == seen["owner"]  # the same pages with texts do show them
