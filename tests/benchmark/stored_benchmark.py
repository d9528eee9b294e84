"""Small benchmarks that several test modules read, run once by the code under test and kept on disk.

A benchmark of one corpus is run by :func:`flare_core.benchmark.suite.run_benchmark` into a folder beside the
stored runs of ``tests/stored_runs.py``, keyed by the same hash of the code and requirements and by the corpus
and settings; a file lock makes the pytest-xdist workers of one session share one run. Each caller gets its
own copy of the store, so a test that adds to or judges its benchmark again never changes the kept one.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

from flare_core.benchmark import suite as benchmark
from flare_core.store.runs import RunStore
from tests.stored_runs import built_once, code_hash

#: Three fast static candidates.
MODELS = ["glove-6b-50d", "tokenlearn-static-64d", "tfidf-svd-256"]
#: The other arguments of the tests' benchmark runs: one control, 150 texts, the fast flow, two label draws.
SETTINGS: dict[str, Any] = dict(
    controls=["shuffled-glove-6b-50d"], max_texts=150, flow_preset="fast", validation=[], label_draws=2
)
_RETURNED = "returned.pickle"


def stored_benchmark(root: Path, corpus: str) -> tuple[RunStore, dict[str, Any]]:
    """A store at ``root`` holding the benchmark of ``corpus`` alone (:data:`MODELS`, :data:`SETTINGS`), and
    the result ``run_benchmark`` returned when it ran: run into the cache the first time, then copied."""
    digest = hashlib.sha256(code_hash().encode())
    digest.update(json.dumps({"corpus": corpus, "models": MODELS, **SETTINGS}, sort_keys=True).encode())

    def build(staging: Path) -> str:
        returned = benchmark.run_benchmark(RunStore(staging / "runs"), [corpus], models=MODELS, **SETTINGS)
        (staging / _RETURNED).write_bytes(pickle.dumps(returned))
        return "done"

    built = built_once(f"benchmark-{corpus}", digest.hexdigest()[:20], build)
    shutil.copytree(built / "runs", root, dirs_exist_ok=True)
    return RunStore(root), pickle.loads((built / _RETURNED).read_bytes())
