"""Progress of a run's stages: written to its manifest (and drawn as terminal bars when asked)."""

from __future__ import annotations

from typing import Any

from flare_core.errors import Cancelled
from flare_core.store.runs import Run


class ProgressReporter:
    """``report(stage, done, total, message, **extra)``: records progress in the run's manifest, draws a
    tqdm bar per stage with ``progress_bar``, and raises :class:`~flare_core.errors.Cancelled` when the
    run's cancellation was requested."""

    def __init__(self, run: Run, progress_bar: bool = False) -> None:
        self.run = run
        self.progress_bar = progress_bar
        self.bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int, message: str = "", **extra: Any) -> None:
        if self.run.cancel_requested():
            raise Cancelled(f"run {self.run.id} was cancelled")
        self.run.set_progress(stage, done, total, message, **extra)
        if self.progress_bar:
            self._draw(stage, done, total, message)

    def _draw(self, stage: str, done: int, total: int, message: str) -> None:
        from tqdm.auto import tqdm

        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=stage, unit="step", leave=True)
        bar.total = total
        bar.n = done
        bar.set_postfix_str(message[:60], refresh=True)
        if done >= total:
            bar.close()


def no_report(*args: Any, **kwargs: Any) -> None:
    return None
