"""The stages that read token states of transformer models: mean-pooling collapse (SOCM) and layer-wise
concentration."""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.errors import DamagedFile
from flare_core.run.embedding_stage import token_model
from flare_core.run.eta import COLLAPSE_UNIT_SECONDS, collapse_costs
from flare_core.run.params import RunParams
from flare_core.run.progress import no_report
from flare_core.store import doctor
from flare_core.store.cache_folder import scratch_dir
from flare_core.store.manifest import transformer_models
from flare_core.store.runs import Run, safe_name


def collapse_rows(n_texts: int, params: RunParams) -> np.ndarray:
    """The sorted rows of the ``params.collapse_texts`` texts (of ``n_texts``) whose pairs the collapse
    stage compares: a seeded sample."""
    n = min(params.collapse_texts, n_texts)
    return np.sort(np.random.default_rng(params.seed).choice(n_texts, size=n, replace=False))


def collapse_stage(
    run: Run, models: list[str], texts: list[str], params: RunParams, report=None, *, recompute: bool = False
) -> None:
    """SOCM of all pairs among ``params.collapse_texts`` sampled texts, per transformer model.

    Models whose pairs are already stored for the same sample are skipped unless ``recompute``.
    With labels, the summary also splits SOCM between same-label and different-label pairs.
    """
    report = report or no_report
    from flare_core import encoders
    from flare_core.analyses import collapse
    from flare_core.encoders.token_store import DamagedTokenStore

    sample = collapse_rows(len(texts), params)
    n = len(sample)
    if run.has("collapse", "sample_rows.npy") and not np.array_equal(
        run.load_array("collapse", "sample_rows.npy"), sample
    ):
        recompute = True
    run.save_array(sample.astype(np.int64), "collapse", "sample_rows.npy")
    pairs = collapse.sample_pairs(n, kind="all", seed=params.seed)
    corpus = run.corpus_frame()
    labels = corpus["label"].to_numpy() if run.manifest["corpus"].get("has_labels") else None
    summaries = []
    sample_texts = [texts[i] for i in sample]
    work = _CollapseWork(
        report, [collapse_costs(*token_model(run, m), sample_texts, params.max_length) for m in models]
    )
    for index, model_id in enumerate(models):
        work.reading(index, model_id, 0, len(sample_texts))
        pairs_done = functools.partial(work.pairs, index, model_id)
        parts = ("collapse", f"{safe_name(model_id)}.parquet")
        if run.has(*parts) and not recompute:
            frame = run.load_frame(*parts)
        else:
            encoder = encoders.load_encoder(model_id, device=params.device)
            # token states stream to disk a chunk of texts at a time; SOCM reads them back per chunk of pairs
            with tempfile.TemporaryDirectory(prefix="tokens-", dir=scratch_dir()) as scratch:
                try:
                    tokens = encoders.write_token_states(
                        encoder,
                        sample_texts,
                        Path(scratch) / "store",
                        max_length=params.max_length,
                        progress=functools.partial(work.reading, index, model_id),
                    )
                except DamagedTokenStore as exc:
                    raise DamagedFile(
                        f"the token states of {model_id} were damaged on disk before the collapse stage read "
                        f"them ({exc.path.name} of the temporary store {exc.path.parent}); they are computed "
                        f"again from the texts: run `flare resume {run.id}`",
                        path=exc.path,
                        recomputable=True,
                    ) from exc
                frame = collapse.pair_distances(tokens, pairs, device=params.device, progress=pairs_done)
            frame["row_i"] = sample[frame["i"].to_numpy()]
            frame["row_j"] = sample[frame["j"].to_numpy()]
            if labels is not None:
                frame["same_label"] = labels[frame["row_i"]] == labels[frame["row_j"]]
            run.save_frame(frame, *parts)
            del encoder, tokens
        stats = collapse.collapse_summary(frame)
        row = {"model": model_id, "n_pairs": stats["n_pairs"], "n_texts": n}
        for quantity in ("socm", "d_mu", "d_sigma"):
            row.update({f"{quantity}_{name}": value for name, value in stats[quantity].items()})
        if "same_label" in frame:
            row["socm_same_label_mean"] = float(frame.loc[frame["same_label"], "socm"].mean())
            row["socm_different_label_mean"] = float(frame.loc[~frame["same_label"], "socm"].mean())
        summaries.append(row)
    run.save_frame(pd.DataFrame(summaries), "collapse", "summary.parquet")
    report("collapse", len(models), len(models), "collapse done", work_done=work.total, work_total=work.total)


class _CollapseWork:
    """The collapse stage's progress in units of its time plan (``COLLAPSE_UNIT_SECONDS`` of prior):
    each model reads the texts for their token states, then compares their pairs; both are counted as
    they are done, at most once per 20th. ``costs``: each model's ``(reading, pairs)`` prior seconds."""

    def __init__(self, report: Callable[..., None], costs: list[tuple[float, float]]) -> None:
        self.report, self.costs = report, costs
        self.total = max(1, round(sum(map(sum, costs)) / COLLAPSE_UNIT_SECONDS))
        self.reported: tuple[int, int, int] = (-1, -1, -1)

    def reading(self, index: int, model_id: str, done: int, total: int) -> None:
        self._report(index, 0, done, total, f"{model_id} reads the texts: {done:,} of {total:,}")

    def pairs(self, index: int, model_id: str, done: int, total: int) -> None:
        self._report(index, 1, done, total, f"SOCM of {model_id}: {done:,} of {total:,} pairs")

    def _report(self, index: int, part: int, done: int, total: int, message: str) -> None:
        step = (index, part, 20 * done // max(total, 1))
        if step <= self.reported:
            return
        self.reported = step
        reading, pairs = self.costs[index]
        fraction = done / max(total, 1)
        seconds = sum(map(sum, self.costs[:index])) + (
            reading * fraction if part == 0 else reading + pairs * fraction
        )
        self.report(
            "collapse",
            index,
            len(self.costs),
            message,
            work_done=min(self.total, round(seconds / COLLAPSE_UNIT_SECONDS)),
            work_total=self.total,
        )


def concentration_stage(
    run: Run, models: list[str], texts: list[str], params: RunParams, report=None
) -> None:
    """Layer-wise token concentration of each supported transformer model."""
    report = report or no_report
    from flare_core import encoders
    from flare_core.analyses import concentration

    n = min(params.concentration_texts, len(texts))
    sample = np.sort(np.random.default_rng(params.seed + 1).choice(len(texts), size=n, replace=False))
    frames, skipped = [], {}
    for index, model_id in enumerate(models):
        report("concentration", index, len(models), f"layer-wise concentration of {model_id}")
        encoder = encoders.load_encoder(model_id, device=params.device)
        try:
            frame = concentration.layer_concentration(
                encoder.model,
                encoder.tokenizer,
                [texts[i] for i in sample],
                device=params.device,
                max_length=encoder.token_limit(params.max_length),
            )
        except concentration.UnsupportedArchitecture as exc:
            skipped[model_id] = str(exc)
            continue
        frame.insert(0, "model", model_id)
        frames.append(frame)
    if frames:
        run.save_frame(pd.concat(frames, ignore_index=True), "concentration.parquet")
    run.save_json({"texts": int(n), "skipped": skipped}, "concentration.json")
    report("concentration", len(models), len(models), "concentration done")


def recompute_collapse(
    run: Run, models: list[str] | None = None, n_texts: int | None = None
) -> dict[str, Any]:
    """Compute (or recompute with ``n_texts`` texts) SOCM and the layer curves of the run's transformer
    models, refresh its summary, and return ``summary`` and ``layers`` rows of those models with their
    ten most collapsed pairs (texts included)."""
    from flare_core.run.summary import summarise

    params = RunParams.from_dict(run.manifest["params"])
    if n_texts is not None:
        params.collapse_texts = n_texts
    available = transformer_models(run)
    chosen = models or available
    unknown = [m for m in chosen if m not in available]
    if unknown:
        raise ValueError(
            f"no token states for {unknown}: collapse needs a transformer model of this run ({available})"
        )
    texts = run.corpus_frame()["text"].tolist()
    collapse_stage(run, chosen, texts, params, recompute=n_texts is not None)
    concentration_stage(run, chosen, texts, params)
    summarise(run)
    most_collapsed = {}
    for model_id in chosen:
        top = run.load_frame("collapse", f"{safe_name(model_id)}.parquet").nlargest(10, "socm")
        most_collapsed[model_id] = [
            {
                "socm": row.socm,
                "d_mu": row.d_mu,
                "d_sigma": row.d_sigma,
                "text_a": texts[row.row_i],
                "text_b": texts[row.row_j],
            }
            for row in top.itertuples()
        ]
    summary = run.load_frame("collapse", "summary.parquet")
    layers = run.load_frame("concentration.parquet") if run.has("concentration.parquet") else pd.DataFrame()
    return {
        "run_id": run.id,
        "summary": _records(summary[summary["model"].isin(chosen)]),
        "layers": _records(layers[layers["model"].isin(chosen)]) if not layers.empty else [],
        "most_collapsed": most_collapsed,
    }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.replace({np.nan: None}).to_dict(orient="records")


def check_scratch(folder: Path | None = None) -> list[doctor.Finding]:
    """Damaged token stores in the cache's scratch folder (``folder``, default
    :func:`~flare_core.store.cache_folder.scratch_dir`): temporary token states of a collapse stage, left
    there by a process that stopped. ``run_id`` is ``""`` and ``file`` the damaged file's path."""
    root = folder if folder is not None else scratch_dir()
    if not any(root.rglob("meta.json")):
        return []  # no token store: spare the import of the encoders (torch)
    from flare_core.encoders.token_store import damaged_stores

    return [
        doctor.Finding(
            "",
            str(exc.path),
            exc.why,
            f"It holds temporary token states, computed again by `flare resume` of the run that needs them; "
            f"`flare doctor --repair` removes the folder {exc.path.parent}.",
            "damaged",
            recomputable=True,
        )
        for exc in damaged_stores(root)
    ]


def remove_scratch(findings: list[doctor.Finding]) -> list[str]:
    """Remove the token store folders of :func:`check_scratch`'s findings; returns what was done."""
    done = []
    for finding in findings:
        folder = Path(finding.file).parent
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # the tokens-* folder of a collapse stage, now empty
            folder.parent.rmdir()
        done.append(f"removed the damaged token store {folder}")
    return done
