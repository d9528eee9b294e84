"""Shared fixtures: a small real corpus (BBC News articles) and stored runs built by the real pipeline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.stored_runs import labelled_run_params, stored_run

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory) -> Path:
    """Embedding cache and extracted models live in one folder per test session, shared by the session's
    pytest-xdist workers (every write to it is atomic)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = Path(os.environ.get("FLARE_TEST_CACHE_DIR") or shared / "flare-cache")
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["FLARE_CACHE_DIR"] = str(cache)
    return cache


@pytest.fixture(autouse=True)
def _main_module_restored():
    """Streamlit's script runner (``AppTest`` included) installs the page script as ``sys.modules["__main__"]``
    and leaves it there; a process started later with ``spawn`` would run that page again and die. Each test
    starts with the main module it found."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def small_corpus_path(tmp_path_factory) -> Path:
    """50 BBC News articles, 10 per topic, as a CSV with ``text`` and ``label`` columns."""
    from flare_core.data.demo import bbc_news_frame

    path = tmp_path_factory.mktemp("corpus") / "bbc50.csv"
    bbc_news_frame(n_per_topic=10, seed=0)[["text", "label"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory):
    from flare_core.store.runs import RunStore

    return RunStore(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def labelled_run(fixture_store, small_corpus_path):
    """A finished run with labels, a transformer, static models and the default controls; both estimators."""

    params = labelled_run_params()
    run = stored_run(fixture_store, small_corpus_path, params, run_id="fixture-labelled",
                     name="labelled fixture", label_column="label")  # fmt: skip
    assert run.status == "done", run.manifest.get("traceback")
    return run


@pytest.fixture(scope="session")
def unlabelled_run(fixture_store, small_corpus_path):
    """A finished run without labels and with static models only (no collapse data)."""
    from flare_core.run.params import RunParams

    params = RunParams(
        models=["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"], estimators=["gmm"], controls=[]
    )
    run = stored_run(fixture_store, small_corpus_path, params, run_id="fixture-static",
                     name="static fixture", label_column=None)  # fmt: skip
    assert run.status == "done", run.manifest.get("traceback")
    return run


@pytest.fixture(scope="session")
def failed_run(fixture_store, small_corpus_path):
    """A run that failed: its only model cannot be loaded."""
    from flare_core.run.params import RunParams

    params = RunParams(models=["no-such-org/no-such-model"], estimators=["gmm"], controls=[])
    run = stored_run(fixture_store, small_corpus_path, params, run_id="fixture-failed",
                     name="failed fixture", label_column="label")  # fmt: skip
    assert run.status == "failed"
    return run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench",
        action="store_true",
        help="also run the tests marked bench: the large cases of properties that faster tests prove",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="a large case of a property a faster test proves: run with --bench")
    for item in items:
        if "bench" in item.keywords and not config.getoption("--bench"):
            item.add_marker(skip)
        shared = _shared_scope(item)
        if shared and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(shared))


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_group_in_id(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` the scheduler reads a test's group from its id, ``path::name@group``, which
    pytest-xdist writes to ``item._nodeid``; pytest 9 builds the id from ``item._id``, so without this every
    test is its own group and a module's fixture is built on both workers."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + suffix)


def _shared_scope(item: pytest.Item) -> str | None:
    """The module (or class) whose fixture this test shares with its neighbours, ``None`` if it shares none:
    under ``--dist loadgroup`` such tests run on one pytest-xdist worker, so the fixture is built once; every
    other test goes to whichever worker is free."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if any(d.scope in ("module", "class", "package") for d in defs):
            return item.nodeid.split("::")[0]
    return None
