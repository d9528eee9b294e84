"""The cache folder shared by every run: embeddings, extracted models, the demo corpus, judged rules and
scratch space.

Layout under :func:`cache_root`::

    embeddings/<key>.npy|.json      the embedding cache (flare_core.encoders.embedding_cache)
    models/<name>/                  built-in models unpacked once (flare_core.encoders.builtin)
    demo/bbc_news_openings_250.csv  the demo corpus
    judged/<key>.json               label-free rules judged on the benchmark (flare_core.answer.label_free)
    scratch/tokens-*/               token states of a run's collapse stage, removed after use
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


def cache_root() -> Path:
    """``$FLARE_CACHE_DIR`` (``~`` expanded) or ``~/.cache/flare-studio``."""
    env = os.environ.get("FLARE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "flare-studio"


def scratch_dir() -> Path:
    """``<cache>/scratch``: temporary files too large for memory (token states), removed after use."""
    path = cache_root() / "scratch"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sweep_stale_scratch(max_age_hours: float = 24.0) -> list[Path]:
    """Remove what killed processes left in the cache: temporary ``.tmp-*`` files of embedding entries
    and scratch folders, untouched for ``max_age_hours`` (a live writer touches its file with every chunk).
    Returns the removed paths."""
    limit = time.time() - max_age_hours * 3600
    removed = []
    root = cache_root()
    candidates = list((root / "embeddings").glob(".tmp-*")) + list((root / "scratch").glob("tokens-*"))
    for path in candidates:
        try:
            newest = max([path.stat().st_mtime] + [p.stat().st_mtime for p in path.rglob("*")])
            if newest >= limit or path.is_symlink():
                continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:  # another process removed or is using it
            continue
        removed.append(path)
    return removed
