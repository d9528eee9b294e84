"""The validity benchmark's figures that ship with the package (made by ``flare benchmark`` for this
version): the odds the answer quotes for a label-free choice, and the Validation page's table."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

#: ``bench/studies/ship_benchmark.py`` writes it, ``flare benchmark --table-only --docs`` shows it; the
#: package carries it (see pyproject's package data).
SHIPPED_RESULTS = Path(__file__).resolve().parents[1] / "benchmark" / "benchmark_results.json"


#: ``flare benchmark --stage answer`` writes it (every corpus, every candidate, no estimators): the
#: few-label answer's prior learns from its classification corpora.
SHIPPED_ANSWER_RESULTS = SHIPPED_RESULTS.with_name("answer_benchmark.json")


def shipped_answer_results() -> dict[str, Any] | None:
    """The answer benchmark shipped with this version, or None."""
    path = SHIPPED_ANSWER_RESULTS
    return _read(str(path), path.stat().st_mtime_ns if path.is_file() else 0)


def shipped_results() -> dict[str, Any] | None:
    """The benchmark shipped with this version, or None."""
    return _read(str(SHIPPED_RESULTS), SHIPPED_RESULTS.stat().st_mtime_ns if SHIPPED_RESULTS.is_file() else 0)


@functools.lru_cache(maxsize=2)
def _read(path: str, stamp: int) -> dict[str, Any] | None:
    return json.loads(Path(path).read_text(encoding="utf-8")) if stamp else None
