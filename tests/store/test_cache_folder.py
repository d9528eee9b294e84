"""The shared cache folder: its root and the sweep of what killed processes left in it."""

from __future__ import annotations

import os
from pathlib import Path

from flare_core.store.cache_folder import cache_root, scratch_dir, sweep_stale_scratch


def test_cache_root_comes_from_the_environment_with_home_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FLARE_CACHE_DIR", "~/flare-cache")
    assert cache_root() == tmp_path / "flare-cache"
    monkeypatch.delenv("FLARE_CACHE_DIR")
    assert cache_root() == Path(tmp_path) / ".cache" / "flare-studio"


def test_scratch_dir_is_created_under_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    assert scratch_dir() == tmp_path / "scratch" and (tmp_path / "scratch").is_dir()


def test_sweep_removes_only_stale_scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    (tmp_path / "embeddings").mkdir()
    (tmp_path / "scratch" / "tokens-old" / "store").mkdir(parents=True)
    (tmp_path / "scratch" / "tokens-new").mkdir(parents=True)
    stale_file = tmp_path / "embeddings" / ".tmp-abc.npy"
    stale_file.write_bytes(b"x")
    live_file = tmp_path / "embeddings" / ".tmp-def.npy"
    live_file.write_bytes(b"x")
    entry = tmp_path / "embeddings" / "0123.npy"
    entry.write_bytes(b"x")
    old = 1_000_000_000  # 2001
    for path in (
        stale_file,
        entry,
        tmp_path / "scratch" / "tokens-old",
        tmp_path / "scratch" / "tokens-old" / "store",
    ):
        os.utime(path, (old, old))
    removed = sweep_stale_scratch()
    assert sorted(p.name for p in removed) == [".tmp-abc.npy", "tokens-old"]
    assert live_file.exists() and entry.exists() and (tmp_path / "scratch" / "tokens-new").exists()
