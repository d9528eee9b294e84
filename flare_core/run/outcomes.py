"""Each stage of a run on its own: one that fails is recorded with its reason in words, the stages that do
not need it still run, and the run ends "done, with problems" instead of failed.

The outcome of every stage is kept in the manifest under ``outcomes``::

    {"geometry": {"status": "done", "models": [...]},
     "maps": {"status": "failed", "why": "...", "todo": "...", "error": "ValueError: ...", "at": "..."},
     "validation": {"status": "skipped", "why": "it needs ... which failed"},
     "sufficiency_flow": {"status": "skipped", "why": "it needs at least 20 texts ...", "models": [...]}}

A stage skipped because of the run's shape (:class:`StageSkipped`: too few texts, one model) is no problem;
one skipped because a stage it needs failed is retried with it.

``flare resume`` computes a run again: a stage already done for the same models is not run again, so a
resume retries only the stages that failed (and the summary, which joins them).
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Sequence
from typing import Any

from flare_core.errors import Cancelled, DamagedFile, ModelUnavailable
from flare_core.run.progress import stage_words
from flare_core.store.runs import Run, utc_now

#: Exceptions whose message is already written for people (the project raises them with specific words).
_WORDED = (ValueError, RuntimeError, DamagedFile, ModelUnavailable, FileNotFoundError)


def problem_words(run_id: str, stage: str, exc: BaseException) -> dict[str, str]:
    """What a person reads about a stage that failed: ``why`` (in words), ``todo`` and the raw ``error``."""
    raw = f"{type(exc).__name__}: {exc}".strip()
    message = str(exc).strip().splitlines()[0][:400] if str(exc).strip() else ""
    if isinstance(exc, MemoryError):
        why = "the machine ran out of memory"
        todo = f"close other programs or analyse fewer texts, then run `flare resume {run_id}`"
    elif isinstance(exc, _WORDED) and message:
        acronym = message[:2].isupper()  # "SOCM needs ..." keeps its capitals
        why = message if acronym else message[0].lower() + message[1:]
        todo = f"run `flare resume {run_id}` to try this stage again"
    else:
        why = f"an unexpected error inside FLARE Studio ({raw[:200]})"
        todo = (
            f"run `flare resume {run_id}` to try again; if it fails the same way, report it with the "
            f"output of `flare show {run_id} --json`"
        )
    return {"why": why.rstrip("."), "todo": todo, "error": raw[:2000]}


def problems(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed stages of a run's manifest, in the order they ran: ``stage``, ``what`` (the stage in
    words), ``why``, ``todo``, ``error``."""
    rows = []
    for stage, outcome in (manifest.get("outcomes") or {}).items():
        if isinstance(outcome, dict) and outcome.get("status") == "failed":
            rows.append({"stage": stage, "what": stage_words(stage), **_fields(outcome)})
    return rows


def _fields(outcome: dict[str, Any]) -> dict[str, str]:
    return {key: str(outcome.get(key, "")) for key in ("why", "todo", "error")}


def problem_sentences(manifest: dict[str, Any]) -> list[str]:
    """One sentence per failed stage: "Drawing a map of each embedding space failed: <why>. To fix:
    <todo>."
    """
    return [
        f"{row['what'][0].upper()}{row['what'][1:]} failed: {row['why']}. To fix it, {row['todo']}."
        for row in problems(manifest)
    ]


def status_words(manifest: dict[str, Any], status: str) -> str:
    """The run's status for people: ``done, with problems`` when a stage failed, else ``status``."""
    return "done, with problems" if status == "done" and problems(manifest) else status


class StageSkipped(Exception):  # noqa: N818 - a stage's word for "nothing to do here", not an error
    """Raised by a stage that cannot apply to this run (too few texts, one model): its message says why,
    in words, and the stage is recorded as skipped, not failed."""


class StageRunner:
    """Runs a run's stages one at a time, isolated from each other (see the module docstring).

    ``runner.run(name, compute, needs=(...), models=[...])`` returns whether the stage is done (now or
    before): a stage given ``models`` is not run again once done for the same models; one without (the
    verdict, the summary) runs every time. A stage whose ``needs`` failed is skipped. ``Cancelled``,
    ``KeyboardInterrupt`` and a full disk stop the whole run; any other exception fails only the stage.
    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self.failed: set[str] = set()

    def run(
        self,
        name: str,
        compute: Callable[[], Any],
        *,
        needs: Sequence[str] = (),
        models: Sequence[str] | None = None,
    ) -> bool:
        self._run.check_cancelled()
        missing = [n for n in needs if n in self.failed]
        if missing:
            self._record(name, status="skipped", why=f"it needs {stage_words(missing[0])}, which failed")
            self.failed.add(name)
            return False
        before = (self._run.manifest.get("outcomes") or {}).get(name) or {}
        finished = before.get("status") in ("done", "skipped")
        if models is not None and finished and before.get("models") == list(models):
            return True  # done by an earlier attempt for the same models: a resume does not redo it
        started = time.perf_counter()
        try:
            compute()
        except StageSkipped as skipped:
            self._record(
                name, status="skipped", why=str(skipped), models=None if models is None else list(models)
            )
            return True
        except (Cancelled, KeyboardInterrupt):
            raise
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise  # nothing more can be written: the run fails with the full disk in words
            self._fail(name, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a stage's failure is recorded, the others go on
            self._fail(name, exc)
            return False
        timings = self._run.manifest.get("timings", {})
        timings[name] = round(time.perf_counter() - started, 3)
        self._run.update(timings=timings)
        self._record(name, status="done", models=None if models is None else list(models))
        return True

    def _fail(self, name: str, exc: BaseException) -> None:
        self.failed.add(name)
        self._record(name, status="failed", **problem_words(self._run.id, name, exc))

    def _record(self, name: str, **outcome: Any) -> None:
        outcomes = self._run.manifest.get("outcomes") or {}
        outcomes[name] = {**outcome, "at": utc_now()}
        self._run.update(outcomes=outcomes)
