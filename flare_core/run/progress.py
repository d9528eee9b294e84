"""Progress of a run's stages: written to its manifest (and drawn as terminal bars when asked)."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from flare_core.run.eta import describe_remaining, manifest_remaining_seconds, timestamp_seconds
from flare_core.store.runs import Run

#: Each stage in plain words, for progress bars and the dashboard.
STAGE_WORDS = {
    "embeddings": "reading your texts with each model",
    "sufficiency_flow": "learning how well each model predicts the others",
    "sufficiency_gmm": "a quicker estimate of how well each model predicts the others",
    "geometry": "measuring the shape of each embedding space",
    "downstream": "scoring each model on your labels",
    "labels": "comparing the models on your labels",
    "validation": "testing how stable the ranking is",
    "maps": "drawing a map of each embedding space",
    "collapse": "measuring what mean pooling hides",
    "concentration": "tracing how tokens gather, layer by layer",
    "summary": "joining every figure in one table",
    "verdict": "writing the verdict",
}


def stage_words(stage: str, done: int | None = None, total: int | None = None) -> str:
    """ "learning how well each model predicts the others: 12 of 49" (the stage's name if unknown)."""
    words = STAGE_WORDS.get(stage, stage.replace("_", " "))
    if done is not None and total:
        return f"{words}: {done} of {total}"
    return words


def _elapsed(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def progress_sentence(manifest: dict[str, Any], now: float | None = None) -> str:
    """A running run in plain words: the stage and its units, the time it has run, the time left.

    "learning how well each model predicts the others: 12 of 49 · running for 3 min · about 4 min left"
    """
    now = time.time() if now is None else now
    progress = manifest.get("progress") or {}
    parts = []
    if progress.get("stage"):
        parts.append(stage_words(progress["stage"], progress.get("done"), progress.get("total")))
    started = timestamp_seconds(manifest.get("started"))
    if started is not None:
        parts.append(f"running for {_elapsed(max(0.0, now - started))}")
    parts.append(describe_remaining(manifest_remaining_seconds(manifest, now)))
    return " · ".join(parts)


class ProgressReporter:
    """``report(stage, done, total, message, **extra)``: records progress in the run's manifest, draws a
    tqdm bar per stage with ``progress_bar``, and raises :class:`~flare_core.errors.Cancelled` when the
    run's cancellation was requested."""

    def __init__(self, run: Run, progress_bar: bool = False) -> None:
        self.run = run
        self.progress_bar = progress_bar
        self.bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int, message: str = "", **extra: Any) -> None:
        self.run.check_cancelled()
        self.run.set_progress(stage, done, total, message, **extra)
        if self.progress_bar:
            self._draw(stage, done, total, message)

    def _draw(self, stage: str, done: int, total: int, message: str) -> None:
        from tqdm.auto import tqdm

        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=stage_words(stage), unit="step", leave=True)
        bar.total = total
        bar.n = done
        left = describe_remaining(manifest_remaining_seconds(self.run.manifest, time.time()))
        bar.set_postfix_str(f"run: {left}", refresh=True)
        if done >= total:
            bar.close()


def no_report(*args: Any, **kwargs: Any) -> None:
    return None


#: The columns of :func:`worker_table`, with their headings in words.
WORKER_COLUMNS = {
    "worker": "worker",
    "stage": "working on",
    "units": "steps done",
    "failed": "steps failed",
    "busy_s": "seconds busy",
    "last_unit": "last step",
    "last_seen": "last seen",
}


def worker_table(workers: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per worker process of a run (its manifest's ``workers``), in :data:`WORKER_COLUMNS`: each
    named "worker 1", "worker 2"… in the order of their process names (a machine's name and a process
    id mean nothing to a reader), the stage in words."""
    table = pd.DataFrame([{"worker": name, **info} for name, info in workers.items()])
    table = table.reindex(columns=list(WORKER_COLUMNS)).sort_values("worker").reset_index(drop=True)
    table["worker"] = [f"worker {i + 1}" for i in range(len(table))]
    table["stage"] = table["stage"].map(lambda s: stage_words(s) if isinstance(s, str) and s else s)
    return table
