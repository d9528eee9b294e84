"""Helpers of the tests that drive FLARE Studio end to end: the ``flare`` command in a subprocess, small
runs that compute only information sufficiency, and checks that every file of a run folder loads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store.runs import RunStore

EVIL = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
STATIC = ["glove-6b-50d", "tokenlearn-static-64d"]


def flare(
    *args: str, runs_dir: Path, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    """``flare ARGS`` with ``FLARE_RUNS_DIR=runs_dir``; with ``check`` its exit status must be 0."""
    env = dict(os.environ, FLARE_RUNS_DIR=str(runs_dir))
    proc = subprocess.run(
        [sys.executable, "-m", "flare_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def flare_here(*args: str, runs_dir: Path, check: bool = True) -> subprocess.CompletedProcess:
    """``flare ARGS`` run in this process by the command's own ``main`` (no new interpreter), with
    ``FLARE_RUNS_DIR=runs_dir``: for a command whose output a test reads, not its process (the process's
    exit statuses are ``tests/cli/test_process_exit.py``'s). With ``check`` its exit status must be 0."""
    import contextlib
    import io

    from flare_core.cli.parser import main
    from flare_core.cli.process_exit import exit_status

    out, err = io.StringIO(), io.StringIO()
    before = os.environ.get("FLARE_RUNS_DIR")
    os.environ["FLARE_RUNS_DIR"] = str(runs_dir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = exit_status(main(list(args)))
            except SystemExit as exc:  # argparse's own refusals
                code = exit_status(exc.code)
    finally:
        if before is None:
            os.environ.pop("FLARE_RUNS_DIR", None)
        else:
            os.environ["FLARE_RUNS_DIR"] = before
    proc = subprocess.CompletedProcess(["flare", *args], code, out.getvalue(), err.getvalue())
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def fast_params(models: list[str], **overrides) -> RunParams:
    """Only the information-sufficiency stage (plus the summary): the stages these tests are about."""
    values = dict(
        models=models,
        estimators=["gmm"],
        flow_preset="fast",
        geometry=False,
        maps=False,
        downstream=False,
        validation=[],
        collapse=False,
        concentration=False,
        controls=[],
    )
    values.update(overrides)
    return RunParams(**values)


def embeddings_params(models: list[str] = STATIC) -> RunParams:
    """The embeddings and the stages that read only them (geometry, downstream, labels): no estimator,
    collapse, concentration, map, validation or control."""
    return RunParams(
        models=list(models),
        estimators=[],
        collapse=False,
        concentration=False,
        maps=False,
        validation=[],
        controls=[],
    )


def write_judged_files(folder: Path, articles: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Search judgements of ``articles`` in ``folder``: ``docs.csv`` (doc_id, text), ``queries.csv`` (12
    queries, an article's first sentence) and ``qrels.tsv`` (its own article graded 2, another article of
    its topic graded 1). Returns the documents and the judgements."""
    docs = pd.DataFrame({"doc_id": [f"doc-{i}" for i in range(len(articles))], "text": articles["text"]})
    docs.to_csv(folder / "docs.csv", index=False)
    topics = articles["label"].to_numpy()
    queries, judged = [], []
    for n, i in enumerate(range(0, len(articles), 2)[:12]):
        queries.append((f"q{n}", articles["text"].iloc[i].split(". ")[0]))
        same = next(j for j in range(len(articles)) if j != i and topics[j] == topics[i])
        judged += [(f"q{n}", f"doc-{i}", 2), (f"q{n}", f"doc-{same}", 1)]
    pd.DataFrame(queries, columns=["query_id", "query"]).to_csv(folder / "queries.csv", index=False)
    qrels = pd.DataFrame(judged, columns=["query_id", "doc_id", "relevance"])
    qrels.to_csv(folder / "qrels.tsv", sep="\t", index=False)
    return docs, qrels


def shown(markdown: object) -> str:
    """The words of a markdown source as a reader sees them where they came from untrusted text: the
    backslash escapes and word joiners of :func:`flare_core.view.plain.markdown_text` taken out (the
    source's own markup, such as ``**``, stays)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown)).replace("\u2060", "")


def page_texts(at) -> str:
    """Every text a Streamlit ``AppTest`` page shows in words (markdown, captions, alerts, titles), one per
    line, as :func:`shown`."""
    parts = [m.value for m in at.markdown] + [m.value for m in at.caption] + [m.value for m in at.info]
    parts += [m.value for m in at.success] + [m.value for m in at.error] + [m.value for m in at.warning]
    parts += [m.value for m in at.title] + [m.value for m in at.subheader]
    return "\n".join(shown(p) for p in parts)


def check_run_files(run_path: Path, *, killed: bool = False) -> int:
    """Every data file of a run folder loads completely; returns how many were checked.

    No temporary file is left, except after a SIGKILL (``killed``), when the ``.tmp-*`` file of the write
    that was cut short may remain: it is never read under a real name.
    """
    leftovers = [p for p in run_path.rglob(".tmp-*")]
    if not killed:
        assert leftovers == [], leftovers
    checked = 0
    for path in run_path.rglob("*"):
        if not path.is_file() or path.name.startswith(".tmp-"):
            continue
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".parquet":
            pd.read_parquet(path)
        elif path.suffix == ".npy":
            np.load(path, allow_pickle=False)
        else:
            continue
        checked += 1
    return checked


# -- runs with planted embeddings (the answer's tests) -------------------------------------------------

N, CLASSES = 60, ("sport", "politics", "tech")


def planted(seed: int = 0) -> tuple[list[str], dict[str, np.ndarray]]:
    """``(labels (N,), {model: (N, d)})``: ``clear`` separates the classes, ``blurred`` half does, ``noise`` not."""
    rng = np.random.default_rng(seed)
    labels = [CLASSES[i % 3] for i in range(N)]
    centres = rng.normal(size=(3, 16)) * 4.0
    codes = np.arange(N) % 3
    clear = centres[codes] + rng.normal(size=(N, 16))
    blurred = centres[codes] * 0.15 + rng.normal(size=(N, 16))
    noise = rng.normal(size=(N, 24))
    arrays = {"clear": clear, "blurred": blurred, "noise": noise}
    return labels, {k: v.astype(np.float32) for k, v in arrays.items()}


def _planted_params() -> RunParams:
    return RunParams(
        models=[], estimators=[], controls=[], collapse=False, concentration=False, maps=False, validation=[],
        geometry=False,
    )  # fmt: skip


def planted_run(tmp_path, *, with_labels: bool):
    """A finished run of :func:`planted`'s embeddings (with the labels in its corpus or not), and the labels."""
    labels, arrays = planted()
    frame = pd.DataFrame({"text": [f"text number {i} about {labels[i]}" for i in range(N)]})
    if with_labels:
        frame["label"] = labels
    path = tmp_path / "corpus.csv"
    frame.to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column="label" if with_labels else None)
    run = create_run(RunStore(tmp_path / "runs"), corpus, _planted_params(), precomputed=arrays)
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    return run, labels
