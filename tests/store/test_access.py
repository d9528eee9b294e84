"""Access: what the owner, a share link's viewer and nobody may do, enforced by the store they read: a
viewer's store knows one run, refuses every write, and without texts shows none of the corpus."""

from __future__ import annotations

import hashlib
import json
import time

import pandas as pd
import pytest

from flare_core.errors import AccessDenied, RunNotFound
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store import access as access_module
from flare_core.store import shares
from flare_core.store.access import (
    ACTIONS,
    Access,
    ViewerStore,
    check_owner_token,
    is_local_address,
    owner_token_matches,
    resolve_access,
)
from flare_core.store.bundle import export_run
from flare_core.store.bundle_import import import_run
from flare_core.store.runs import RunStore
from flare_core.store.texts import REMOVED
from tests.store.test_bundle import TEXTS, make_run

OWNER_TOKEN = "owner-token-of-this-server-0123456789"


def _snapshot(root) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".store.lock"
    }


@pytest.fixture
def store(tmp_path):
    make_run(tmp_path / "runs", "run-a")
    make_run(tmp_path / "runs", "run-b")
    return RunStore(tmp_path / "runs")


def test_the_owner_may_do_everything_a_viewer_may_read_its_run_and_nobody_nothing():
    owner, nobody = Access.owner(), Access.nobody()
    viewer = Access.viewer("run-a", texts=False, digest="d")
    reader = Access.viewer("run-a", texts=True, digest="d")
    for action in ACTIONS:
        assert owner.allows(action, "run-b") and not nobody.allows(action, "run-a")
        assert viewer.allows(action, "run-a") == (action == "read")
        assert reader.allows(action, "run-a") == (action in ("read", "texts"))
        assert not reader.allows(action, "run-b")
    with pytest.raises(AccessDenied, match="A share link cannot delete runs"):
        viewer.require("delete", "run-a")
    with pytest.raises(AccessDenied, match="cannot label texts"):
        reader.require("label", "run-a")
    with pytest.raises(ValueError, match="action must be one of"):
        owner.allows("drop-table")
    assert len({owner.scope, viewer.scope, reader.scope, nobody.scope}) == 4


def test_a_viewers_store_knows_its_run_only(store):
    viewer = Access.viewer("run-a", texts=True, digest="d").store(store)
    assert [m["id"] for m in viewer.list()] == ["run-a"] and [r.id for r in viewer] == ["run-a"]
    assert viewer.get("run-a").corpus_frame()["text"].tolist() == TEXTS
    with pytest.raises(RunNotFound) as other:
        viewer.get("run-b")
    with pytest.raises(RunNotFound) as missing:
        viewer.get("run-zzz")
    assert str(other.value) == "no run 'run-b' here" and str(missing.value) == "no run 'run-zzz' here"
    assert not viewer.exists("run-b") and viewer.unreadable() == []
    with pytest.raises(ValueError, match="invalid run id"):
        viewer.get("../run-b")
    assert list(Access.nobody().store(store)) == [] and Access.owner().store(store) is store


def test_a_viewers_store_refuses_every_write(store, tmp_path):
    store.get("run-a").update(status="queued", pid=None, queue={"submitted": time.time_ns()})
    (store.get("run-a").path / "cancel.requested").unlink()  # left by make_run for the bundle tests
    before = _snapshot(store.root)
    viewer = Access.viewer("run-a", texts=True, digest="d").store(store)
    run = viewer.get("run-a")
    attempts = {
        "update": lambda: run.update(name="x"),
        "save_json": lambda: run.save_json({}, "labels.json"),
        "save_frame": lambda: run.save_frame(pd.DataFrame({"a": [1]}), "labels.parquet"),
        "request_cancel": run.request_cancel,
        "set_progress": lambda: run.set_progress("x", 1, 2),
        "delete": lambda: viewer.delete("run-a"),
        "create": lambda: viewer.create({"name": "x"}),
        "root": lambda: viewer.root,
        "submit": lambda: jobs.submit(viewer, "run-a"),
        "dispatch": lambda: jobs.dispatch(viewer),
        "cancel": lambda: jobs.cancel(viewer, "run-a"),
        "share": lambda: shares.create_link(viewer, "run-a"),
        "revoke": lambda: shares.revoke_links(viewer, "run-a", "abcd"),
        "import": lambda: import_run(viewer, export_run(store.get("run-b"), tmp_path / "b.zip"), run_id="c"),
        "create_run": lambda: create_run(viewer, _corpus(tmp_path), _params()),
    }
    for name, attempt in attempts.items():
        with pytest.raises(AccessDenied):
            attempt()
        assert _snapshot(store.root) == before, name
    with pytest.raises(RunNotFound):
        jobs.cancel(viewer, "run-b")
    assert jobs.waiting_runs(store) == ["run-a"] and not store.get("run-a").cancel_requested()


def _corpus(folder):
    from flare_core.data.corpus import load_corpus

    pd.DataFrame({"text": TEXTS}).to_csv(folder / "corpus.csv", index=False)
    return load_corpus(folder / "corpus.csv", text_column="text", label_column=None)


def _params():
    from flare_core.run.params import RunParams

    return RunParams(models=["glove-6b-50d"], estimators=["gmm"], controls=[])


def test_a_figures_only_viewer_reads_no_corpus_text(store):
    run = store.get("run-a")
    run.save_frame(pd.DataFrame({"row": [0, 1], "snippet": TEXTS[:2], "score": [0.5, 0.25]}), "top.parquet")
    run.update(error=f"failed on the text {TEXTS[3]}")
    run.save_json({"examples": [TEXTS[0][:30] + "…"], "models": ["glove-6b-50d"]}, "notes.json")
    figures_only = Access.viewer("run-a", texts=False, digest="d").store(store).get("run-a")

    corpus = figures_only.corpus_frame()
    assert set(corpus["text"]) == {""} and corpus["n_chars"].tolist() == [len(t) for t in TEXTS]
    assert corpus["label"].tolist() == list("ababab")
    assert list(figures_only.load_frame("pairs.parquet").columns) == ["score"]  # text_a, text_b dropped
    assert list(figures_only.load_frame("top.parquet").columns) == ["row", "score"]  # texts found by value
    assert figures_only.manifest["error"] == REMOVED and figures_only.manifest["name"] == "bundle test"
    assert figures_only.load_json("notes.json") == {"examples": [REMOVED], "models": ["glove-6b-50d"]}
    dumped = json.dumps([figures_only.manifest, figures_only.load_json("notes.json")])
    assert not [t for t in TEXTS if t in dumped or t[:30] in dumped]
    # the same run through a link with texts, and through the owner's store, is whole
    with_texts = Access.viewer("run-a", texts=True, digest="d").store(store).get("run-a")
    assert with_texts.corpus_frame()["text"].tolist() == TEXTS and "n_chars" not in with_texts.corpus_frame()
    assert with_texts.manifest["error"] == store.get("run-a").manifest["error"]


def test_owner_tokens_are_compared_in_constant_time(monkeypatch):
    calls = []
    real = access_module.hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(access_module.hmac, "compare_digest", spy)
    assert owner_token_matches(OWNER_TOKEN, OWNER_TOKEN)
    assert not owner_token_matches("x", OWNER_TOKEN) and not owner_token_matches(
        OWNER_TOKEN + "x", OWNER_TOKEN
    )
    assert calls == [(64, 64)] * 3  # digests of equal length, whatever the length of the guess
    assert not owner_token_matches(OWNER_TOKEN, None) and not owner_token_matches(None, OWNER_TOKEN)
    assert check_owner_token(OWNER_TOKEN) == OWNER_TOKEN
    for weak in ("short", "a token with spaces in it", ""):
        with pytest.raises(ValueError, match="at least 16 characters"):
            check_owner_token(weak)


@pytest.mark.parametrize(
    ("host", "local"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("", False), (None, False), ("192.168.1.5", False), ("example.org", False)],
)  # fmt: skip
def test_only_loopback_addresses_are_local(host, local):
    assert is_local_address(host) is local


def test_a_session_gets_what_its_credential_gives_and_never_more(store):
    token_a, link_a = shares.create_link(store, "run-a", texts=False)
    token_b, _ = shares.create_link(store, "run-b")

    def resolve(mode="token", **kw):
        return resolve_access(store, mode=mode, owner_token=OWNER_TOKEN, **kw)

    viewer_a = resolve(share=token_a)
    assert viewer_a == Access.viewer("run-a", texts=False, digest=link_a.digest, prefix=link_a.prefix)
    assert resolve(mode="open") == Access.owner()  # this machine only: the owner
    assert resolve() == Access.nobody()  # reachable by others: a link or the token is needed
    assert resolve(owner=OWNER_TOKEN) == Access.owner()
    refused = Access.nobody(refused=True)
    assert resolve(owner="wrong-token-guessed-here") == refused
    assert resolve(mode="open", owner="wrong-token-guessed-here") == refused
    assert resolve(mode="off", owner=OWNER_TOKEN) == refused  # FLARE_VIEWER_ONLY: no owner at all
    assert resolve(share=secrets_token()) == refused
    # a session keeps what it held when it presents nothing; a held link is checked again
    assert resolve(held=viewer_a) == viewer_a and resolve(mode="open", held=viewer_a) == viewer_a
    assert resolve(held=viewer_a, share=token_a) == viewer_a
    assert resolve(held=viewer_a, owner="wrong-token-guessed-here") == refused
    assert resolve(mode="open", held=refused) == refused
    assert resolve(held=Access.owner()) == Access.owner()
    assert resolve(held=viewer_a, share=token_b).run_id == "run-b"  # another valid link: its own run
    shares.revoke_links(store, "run-a", token_a)
    assert resolve(held=viewer_a) == refused and resolve(share=token_a) == refused


def secrets_token() -> str:
    import secrets

    return secrets.token_urlsafe(24)


def test_a_viewer_of_a_run_that_is_gone_is_refused(store):
    token, _ = shares.create_link(store, "run-a")
    viewer = resolve_access(store, mode="open", share=token)
    store.delete("run-a")
    assert resolve_access(store, mode="open", held=viewer) == Access.nobody(refused=True)
    assert isinstance(viewer.store(store), ViewerStore) and list(viewer.store(store)) == []
