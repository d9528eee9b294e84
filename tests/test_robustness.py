"""Robustness: hostile corpora, hostile ids and files, faults (killed worker, full disk, broken model), load.

Bundles with symlink, ``../`` or pickled members are refused by ``tests/test_bundle.py``
(``test_refused_bundles_write_nothing``: cases ``symlink``, ``parent``, ``nested-parent``, ``pickled-npy``).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flare_core.data.corpus import AUTO, Corpus, load_corpus
from flare_core.errors import CorpusError
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.params import RunParams
from flare_core.store import atomic
from flare_core.store.export import safe_csv
from flare_core.store.runs import RunNotFound, RunStore
from flare_core.view.results import run_results

EVIL = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
STATIC = ["glove-6b-50d", "tokenlearn-static-64d"]


def flare(*args: str, runs_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLARE_RUNS_DIR=str(runs_dir))
    return subprocess.run(
        [sys.executable, "-m", "flare_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def _fast_params(models: list[str], **overrides) -> RunParams:
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
    )
    values.update(overrides)
    return RunParams(**values)


def _check_run_files(run_path: Path, *, killed: bool = False) -> int:
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


# ==================================================================================================
# Hostile corpora
# ==================================================================================================


def test_invalid_utf8_in_an_otherwise_utf8_file_loads_with_a_visible_warning(tmp_path):
    content = "text,label\ncafé au lait,a\n".encode() + b"broken \xff byte here,b\nplain,a\n"
    corpus = load_corpus(_write(tmp_path / "mixed.csv", content))
    assert len(corpus) == 3
    warning = corpus.stats["encoding_warning"]
    assert warning and "not valid UTF-8" in warning and "0xFF" in warning and "line 3" in warning
    assert corpus.stats["encoding"] in ("cp1252", "latin-1")


def test_nul_byte_deep_in_a_jsonl_file_names_the_line(tmp_path):
    lines = [json.dumps({"text": f"record {i}"}) for i in range(6)]
    body = ("\r\n".join(lines[:4]) + "\r\n").encode() + b'{"text": "bad\x00"}\r\n' + lines[5].encode()
    with pytest.raises(CorpusError, match=r"NUL byte \(0x00\) at line 5"):
        load_corpus(_write(tmp_path / "nul.jsonl", body))


def test_one_column_file_with_an_unusual_header_and_quoted_commas(tmp_path):
    path = _write(tmp_path / "one.csv", 'notes\n"a, b, c"\n"x; y | z"\nplain\n')
    corpus = load_corpus(path)
    assert corpus.text_column == "notes"
    assert corpus.texts == ["a, b, c", "x; y | z", "plain"]
    assert corpus.labels is None


def test_hundred_thousand_character_texts_load_and_embed_with_glove(tmp_path):
    from flare_core import encoders

    words = ["market", "economy", "football", "election", "film"]
    texts = [(" ".join([w] * 30_000))[:100_000].strip() + "." for w in words]
    path = tmp_path / "long.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    corpus = load_corpus(path)
    assert all(len(t) >= 99_990 for t in corpus.texts)
    assert corpus.texts == texts
    encoder = encoders.load_encoder("glove-6b-50d")
    started = time.perf_counter()
    emb = encoders.embed(encoder, corpus.texts, corpus_hash=corpus.content_hash, cache_dir=None)
    assert time.perf_counter() - started < 20
    assert emb.shape == (5, 50) and emb.dtype == np.float32 and np.isfinite(emb).all()
    assert np.linalg.matrix_rank(emb) == 5  # five different words, five different vectors


_BIG_LOAD = """
import json, resource, sys, time
from flare_core.data.corpus import load_corpus
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
full = load_corpus(sys.argv[1], text_column="text", label_column="label")
full_s = time.perf_counter() - t
t = time.perf_counter()
a = load_corpus(sys.argv[1], text_column="text", label_column="label", max_rows=1000, seed=3)
sample_s = time.perf_counter() - t
b = load_corpus(sys.argv[1], text_column="text", label_column="label", max_rows=1000, seed=3)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "n": len(full), "full_s": full_s, "sample_s": sample_s, "n_sample": len(a),
    "ids": a.ids, "same": a.ids == b.ids and a.content_hash == b.content_hash,
    "texts_ok": all(t == f"row {i} about topic {i % 7} and a few more words" for i, t in zip(a.ids, a.texts)),
    "sampled_out": a.stats["n_sampled_out"], "base_mb": base / 1024, "peak_mb": peak / 1024,
}))
"""


def test_two_hundred_thousand_rows_load_fast_and_sample(tmp_path):
    n = 200_000
    path = tmp_path / "big.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("text,label\n")
        fh.writelines(f"row {i} about topic {i % 7} and a few more words,t{i % 7}\n" for i in range(n))
    proc = subprocess.run(
        [sys.executable, "-c", _BIG_LOAD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n"] == n
    assert out["full_s"] < 10, out
    assert out["n_sample"] == 1000 and out["sampled_out"] == n - 1000
    assert out["same"] and out["texts_ok"]
    assert out["ids"] == sorted(out["ids"]) and len(set(out["ids"])) == 1000
    # a 10 MB file: loading it must not cost more than a few hundred MB above the interpreter
    assert out["peak_mb"] - out["base_mb"] < 400, out


def test_a_corpus_of_only_duplicates(tmp_path):
    path = _write(tmp_path / "dup.csv", "text,label\n" + "same text,a\n" * 40)
    corpus = load_corpus(path)
    assert len(corpus) == 40 and corpus.stats["n_duplicates"] == 39
    with pytest.raises(CorpusError, match=r"only 1 usable text.*39 duplicates dropped.*at least 2"):
        load_corpus(path, drop_duplicates=True)


def test_formula_texts_are_kept_verbatim_and_escaped_by_safe_csv(tmp_path):
    formulas = ["=cmd|' /C calc'!A0", "+1", "@SUM(A1:A9)", "-2+3", "\t=1+1", '=HYPERLINK("http://x")']
    path = tmp_path / "f.csv"
    pd.DataFrame({"text": formulas + ["plain words"], "label": ["=1+1", "b"] * 3 + ["a"]}).to_csv(
        path, index=False
    )
    corpus = load_corpus(path, text_column="text", label_column="label")
    assert corpus.texts == formulas + ["plain words"]
    frame = corpus.to_frame()
    frame["=bad column"] = 1.5
    rows = list(csv.reader(io.StringIO(safe_csv(frame).decode("utf-8"))))
    header, body = rows[0], rows[1:]
    assert header == ["id", "text", "label", "'=bad column"]
    assert [r[1] for r in body] == ["'" + f for f in formulas] + ["plain words"]
    assert body[0][2] == "'=1+1" and body[1][2] == "b"
    assert [r[0] for r in body] == [str(i) for i in range(7)] and body[0][3] == "1.5"  # numbers untouched
    for row in body:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t")) or cell == ""


# -- column choices: fuzzed -------------------------------------------------------------------------------

_FUZZ_FRAME = pd.DataFrame(
    {
        "text": [
            "alpha beta",
            "gamma",
            "",
            "alpha beta",
            "delta words",
            None,
            "epsilon",
            "zeta eta",
            "theta",
        ],
        "label": ["a", "b", "a", "b", None, "a", "b", "a", "b"],
        "sentence1": ["s one", "s two", "s three", None, "s five", "s six", "s seven", "s eight", "s nine"],
        "sentence2": ["t one", "t two", "t three", "t four", "t five", "t six", "t seven", "t eight", "t9"],
        "score": ["1", "2.5", "x", "3", "", "4", "5", "0", "1"],
        "num": ["1", "2", "3", "4", "5", "6", "7", "8", "9"],
        "id": [str(i) for i in range(9)],
    }
)
_COLUMNS = list(_FUZZ_FRAME.columns)


def _fuzz_bytes(fmt: str) -> bytes:
    if fmt == "csv":
        return _FUZZ_FRAME.to_csv(index=False).encode()
    if fmt == "jsonl":
        return "\n".join(
            json.dumps({k: v for k, v in row.items() if v is not None})
            for row in _FUZZ_FRAME.to_dict("records")
        ).encode()
    buffer = io.BytesIO()
    _FUZZ_FRAME.to_parquet(buffer, index=False)
    return buffer.getvalue()


_FUZZ_DATA = {fmt: _fuzz_bytes(fmt) for fmt in ("csv", "jsonl", "parquet")}
_column = st.sampled_from([*_COLUMNS, "missing", "", "TEXT"]) | st.integers(0, 3)


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(sorted(_FUZZ_DATA)),
    text_column=st.none() | _column,
    label_column=st.just(AUTO) | st.none() | _column,
    pair_columns=st.just(AUTO)
    | st.none()
    | st.lists(st.sampled_from([*_COLUMNS, "missing"]), max_size=4).map(tuple),
    drop_duplicates=st.booleans(),
    max_rows=st.none() | st.integers(-1, 12),
    seed=st.integers(-1, 3),
)
def test_fuzzed_column_choices_give_a_corpus_or_a_corpus_error(
    fmt, text_column, label_column, pair_columns, drop_duplicates, max_rows, seed
):
    try:
        corpus = load_corpus(
            _FUZZ_DATA[fmt],
            name=f"fuzz.{fmt}",
            text_column=text_column,
            label_column=label_column,
            pair_columns=pair_columns,
            drop_duplicates=drop_duplicates,
            max_rows=max_rows,
            seed=seed,
        )
    except CorpusError as exc:
        assert str(exc)
        return
    assert isinstance(corpus, Corpus)
    assert len(corpus.texts) == len(corpus.ids) >= 2
    assert corpus.ids == sorted(set(corpus.ids))
    source = _FUZZ_FRAME[corpus.text_column]
    assert corpus.texts == [str(source[i]) for i in corpus.ids]
    if max_rows is not None:
        assert len(corpus) <= max_rows
    if drop_duplicates:
        assert len(set(corpus.texts)) == len(corpus.texts)
    if corpus.labels is not None:
        assert len(corpus.labels) == len(corpus.texts) and all(corpus.labels)


# ==================================================================================================
# Hostile ids and files
# ==================================================================================================


@pytest.mark.parametrize("bad", ["../../x", "..", "/tmp", "/etc/passwd", "runs/../x"])
def test_store_refuses_ids_that_name_paths(tmp_path, bad):
    store = RunStore(tmp_path / "runs")
    store.create({"name": "kept"}, run_id="kept")
    sentinel = tmp_path / "x"
    sentinel.mkdir()
    (sentinel / "manifest.json").write_text("{}")
    for call in (store.get, store.delete, lambda i: jobs.start(store, i), lambda i: jobs.cancel(store, i)):
        with pytest.raises(ValueError, match="invalid run id"):
            call(bad)
    assert not store.exists(bad)
    assert (sentinel / "manifest.json").exists() and store.exists("kept")


@pytest.mark.parametrize(
    "args", [("show", "/etc"), ("delete", "../../x"), ("resume", ".."), ("cancel", "../runs")]
)
def test_cli_refuses_ids_that_name_paths(tmp_path, args):
    sentinel = tmp_path / "x"
    sentinel.mkdir()
    (sentinel / "manifest.json").write_text('{"id": "x"}')
    proc = flare(*args, runs_dir=tmp_path / "runs")
    assert proc.returncode == 2 and "invalid run id" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (sentinel / "manifest.json").exists()
    assert not (tmp_path / "runs").exists()


def test_cli_refuses_a_pickled_npy_and_creates_nothing(tmp_path):
    corpus = _write(tmp_path / "c.csv", "text\nhello world\nanother text\nthird one\n")
    evil = tmp_path / "evil.npy"
    np.save(evil, np.array([{"a": 1}, None, [1, 2]], dtype=object), allow_pickle=True)
    runs = tmp_path / "runs"
    proc = flare("run", str(corpus), "--models", "glove-6b-50d", "--embeddings", f"x={evil}", runs_dir=runs)
    assert proc.returncode == 2, proc.stderr
    assert "pickle" in proc.stderr and "Traceback" not in proc.stderr
    assert not runs.exists() or list(runs.iterdir()) == []


# -- symbolic links inside the store --------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the store holding a plausible manifest and a secret file."""
    folder = tmp_path / "outside"
    folder.mkdir()
    manifest = {"id": "planted", "name": "planted", "status": "done", "created": "9999", "models": []}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "secret.json").write_text(json.dumps({"text": "SECRET-CONTENT"}))
    pd.DataFrame({"id": [0], "text": ["SECRET-CONTENT"], "label": [None]}).to_parquet(
        folder / "secret.parquet"
    )
    return folder


def test_a_run_folder_that_is_a_symlink_is_not_followed(tmp_path, outside):
    store = RunStore(tmp_path / "runs")
    real = store.create({"name": "real"})
    (store.root / "planted").symlink_to(outside, target_is_directory=True)
    assert [m["id"] for m in store.list()] == [real.id]
    assert not store.exists("planted")
    with pytest.raises(RunNotFound):
        store.get("planted")
    with pytest.raises(RunNotFound):
        store.delete("planted")
    assert (outside / "secret.json").exists() and (outside / "manifest.json").exists()


def test_a_manifest_that_is_a_symlink_is_not_followed(tmp_path, outside):
    store = RunStore(tmp_path / "runs")
    folder = store.root / "linked"
    folder.mkdir(parents=True)
    (folder / "manifest.json").symlink_to(outside / "manifest.json")
    assert store.list() == []
    with pytest.raises(RunNotFound):
        store.get("linked")


def test_artefacts_that_are_symlinks_are_not_read(tmp_path, outside):
    from flare_core.store.bundle import export_run

    store = RunStore(tmp_path / "runs")
    run = store.create({"name": "r", "status": "done", "models": [], "corpus": {}, "params": {}})
    (run.path / "corpus.parquet").symlink_to(outside / "secret.parquet")
    (run.path / "verdict.json").symlink_to(outside / "secret.json")
    (run.path / "sufficiency").symlink_to(outside, target_is_directory=True)
    for parts in (("corpus.parquet",), ("verdict.json",), ("sufficiency", "secret.json")):
        assert not run.has(*parts)
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_frame("corpus.parquet")
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_json("verdict.json")
    with pytest.raises(ValueError, match="symbolic link"):
        run.load_json("sufficiency", "secret.json")
    assert "SECRET-CONTENT" not in atomic.to_json(run_results(run))
    bundle = export_run(run, tmp_path / "r.zip")
    assert b"SECRET-CONTENT" not in bundle.read_bytes()


# ==================================================================================================
# A real run with hostile names and texts, and a model that cannot be loaded
# ==================================================================================================


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, small_corpus_path):
    folder = tmp_path_factory.mktemp("hostile")
    frame = pd.read_csv(small_corpus_path)
    frame.loc[0, "text"] = f"{EVIL} {frame.loc[0, 'text']}"
    frame.loc[1, "text"] = f"{IMG} {frame.loc[1, 'text']}"
    frame.loc[2, "text"] = f"=cmd|' /C calc'!A0 {frame.loc[2, 'text']}"
    path = folder / f"corpus {IMG}.csv"
    frame.to_csv(path, index=False)
    corpus = load_corpus(path, text_column="text", label_column="label")
    assert corpus.texts[0].startswith(EVIL) and corpus.texts[1].startswith(IMG)
    noise = np.random.default_rng(0).normal(size=(len(corpus), 8)).astype(np.float32)
    store = RunStore(folder / "runs")
    params = _fast_params(["glove-6b-50d", "no-such-org/no-such-model"])
    run = create_run(store, corpus, params, name=f"run {EVIL}", precomputed={f"noise{EVIL}": noise})
    status = jobs.run_in_process(run)
    return run, status


@pytest.mark.slow
def test_a_model_that_fails_to_load_does_not_sink_the_run(hostile_run):
    run, status = hostile_run
    assert status == "done", run.manifest.get("traceback")
    models = {m["id"]: m for m in run.manifest["models"]}
    broken = models["no-such-org/no-such-model"]
    assert broken["status"] == "failed" and broken["error"]
    assert models["glove-6b-50d"]["status"] == models[f"noise{EVIL}"]["status"] == "done"
    results = run_results(run)
    ranked = {row["model"] for row in results["sufficiency"]["gmm"]["scores"]}
    assert ranked == {"glove-6b-50d", f"noise{EVIL}"}
    assert "no-such-org/no-such-model" not in results["sufficiency"]["gmm"]["is_matrix"]["sources"]
    assert all(np.isfinite(row["score"]) for row in results["sufficiency"]["gmm"]["scores"])


@pytest.mark.slow
def test_html_in_texts_names_and_models_is_escaped_in_the_report(hostile_run):
    from flare_core.view.report import build_report

    run, _ = hostile_run
    for include_texts in (True, False):
        page = build_report(run, include_texts=include_texts)
        assert EVIL not in page and IMG not in page
        assert "alert(1)</script>" not in page
        assert "noise&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the model name, escaped
        assert "run &lt;script&gt;alert(1)&lt;/script&gt;" in page  # the run name, escaped
        assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the corpus file name, escaped
        assert page.count("<script") == page.count("</script>")
    exported = safe_csv(run.corpus_frame()).decode("utf-8")
    assert "'=cmd|' /C calc'!A0" in exported


# ==================================================================================================
# Faults
# ==================================================================================================


def _pair_files(run) -> dict[str, int]:
    """Conditional pairs stored by the flow stage (its store is ``<run>/sufficiency/flow/pairs/``)."""
    folder = run.path / "sufficiency" / "flow" / "pairs"
    if not folder.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in folder.rglob("s*_t*.json")}


@pytest.mark.slow
def test_killed_worker_reads_failed_keeps_its_pairs_and_resumes_to_the_uninterrupted_result(
    tmp_path, small_corpus_path, monkeypatch
):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    params = _fast_params([*STATIC, "tfidf-svd-256"], estimators=["flow"], seed=7)
    store = RunStore(tmp_path / "runs")
    run = create_run(store, corpus, params)
    pid = jobs.start(store, run.id)
    total_pairs = 3 * 2
    deadline = time.monotonic() + 240
    while not _pair_files(run):
        assert time.monotonic() < deadline, "no conditional pair was stored in time"
        assert jobs.effective_status(run) in ("queued", "running"), run.manifest.get("traceback")
        time.sleep(0.05)
    assert run.manifest["pid"] == pid
    os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    kept = _pair_files(run)
    assert 1 <= len(kept) < total_pairs, kept

    assert run.status == "running"  # the manifest still says so: nobody told it otherwise
    monkeypatch.setattr(jobs, "STALE_AFTER_SECONDS", 1.0)
    time.sleep(1.2)
    assert jobs.effective_status(run) == "failed"
    assert _check_run_files(run.path, killed=True) > 0

    proc = flare("resume", run.id, "--json", "--runs-dir", str(store.root), runs_dir=store.root, timeout=400)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"
    assert run.status == "done"
    after = _pair_files(run)
    assert len(after) == total_pairs
    assert {name: after[name] for name in kept} == kept  # the pairs finished before the kill were reused
    _check_run_files(run.path, killed=True)

    reference = create_run(RunStore(tmp_path / "reference"), corpus, params)
    assert jobs.run_in_process(reference) == "done", reference.manifest.get("traceback")
    resumed = run_results(run)["sufficiency"]["flow"]["is_matrix"]
    straight = run_results(reference)["sufficiency"]["flow"]["is_matrix"]
    assert resumed["sources"] == straight["sources"] and resumed["targets"] == straight["targets"]
    np.testing.assert_array_equal(np.array(resumed["nats"], float), np.array(straight["nats"], float))
    np.testing.assert_array_equal(np.array(resumed["per_dim"], float), np.array(straight["per_dim"], float))


def _full_disk(monkeypatch, fail) -> list[Path]:
    """Make ``flare_core.store.atomic`` writes fail with ENOSPC (after writing part of the file) when ``fail(path)``."""
    real = atomic.atomic_write
    failed: list[Path] = []

    def atomic_write(path, write):
        path = Path(path)
        if not fail(path):
            return real(path, write)

        def partial(tmp: str) -> None:
            write(tmp)
            with open(tmp, "r+b") as fh:
                fh.truncate(max(0, os.path.getsize(tmp) // 2))
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        failed.append(path)
        return real(path, partial)

    monkeypatch.setattr(atomic, "atomic_write", atomic_write)
    return failed


@pytest.mark.slow
def test_disk_full_once_while_saving_embeddings_fails_the_run_cleanly(
    tmp_path, small_corpus_path, monkeypatch
):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path / "runs"), corpus, _fast_params(STATIC))
    state = {"done": False}

    def fail(path: Path) -> bool:
        if not state["done"] and path.parent == run.path / "embeddings":
            state["done"] = True
            return True
        return False

    failed = _full_disk(monkeypatch, fail)
    assert jobs.run_in_process(run) == "failed"
    assert len(failed) == 1
    manifest = run.manifest
    assert "No space left on device" in manifest["error"] and "OSError" in manifest["error"]
    assert not failed[0].exists()  # the half-written file never appeared under its name
    _check_run_files(run.path)

    monkeypatch.undo()  # space is back: the run resumes and finishes
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    assert _check_run_files(run.path) > 0
    assert {r["model"] for r in run_results(run)["sufficiency"]["gmm"]["scores"]} == set(STATIC)


@pytest.mark.slow
def test_disk_that_stays_full_leaves_only_complete_files(tmp_path, small_corpus_path, monkeypatch):
    corpus = load_corpus(small_corpus_path, text_column="text", label_column="label")
    run = create_run(RunStore(tmp_path / "runs"), corpus, _fast_params(STATIC))
    state = {"full": False}

    def fail(path: Path) -> bool:
        if run.path / "sufficiency" in path.parents:
            state["full"] = True
        return state["full"] and run.path in path.parents

    failed = _full_disk(monkeypatch, fail)
    try:
        status = jobs.run_in_process(run)
    except OSError as exc:  # recording the failure needs the disk too: the error propagates
        assert exc.errno == errno.ENOSPC
    else:
        assert status == "failed"
    assert failed
    assert all(not p.exists() or p.name in ("manifest.json", jobs.HEARTBEAT) for p in failed)
    assert _check_run_files(run.path) > 0
    assert run.manifest["status"] in ("running", "failed")
    monkeypatch.setattr(jobs, "STALE_AFTER_SECONDS", 0.5)
    time.sleep(0.6)
    assert jobs.effective_status(run) == "failed"

    monkeypatch.undo()
    assert jobs.run_in_process(run) == "done", run.manifest.get("traceback")
    _check_run_files(run.path)


# ==================================================================================================
# Load and resource limits
# ==================================================================================================


@pytest.mark.slow
def test_two_runs_at_once_complete_and_a_third_is_refused(tmp_path, small_corpus_path, monkeypatch):
    monkeypatch.setenv("FLARE_MAX_JOBS", "2")
    corpus = load_corpus(small_corpus_path, text_column="text", label_column=None)
    store = RunStore(tmp_path / "runs")
    runs = [create_run(store, corpus, _fast_params(STATIC, seed=s)) for s in range(3)]
    for run in runs[:2]:
        jobs.start(store, run.id)
    with pytest.raises(RuntimeError, match=r"2 runs are already executing \(limit 2"):
        jobs.start(store, runs[2].id)
    assert runs[2].status == "queued" and not runs[2].has("worker.log")
    for run in runs[:2]:
        assert jobs.wait(store, run.id, timeout=300, poll=0.2) == "done", run.manifest.get("traceback")
        scores = run_results(run)["sufficiency"]["gmm"]["scores"]
        assert {r["model"] for r in scores} == set(STATIC)
        assert all(np.isfinite(r["score"]) for r in scores)
        _check_run_files(run.path)
    assert jobs.active_runs(store) == []


class _CountingStream(io.RawIOBase):
    """A non-seekable stream of ``size`` bytes that counts what is read from it."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.read_bytes if n is None or n < 0 else min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b"a\n" * (n // 2) + b"a" * (n % 2)


def test_max_bytes_refuses_large_inputs_before_reading_them(tmp_path):
    path = tmp_path / "large.csv"
    with open(path, "wb") as fh:
        fh.write(b"text\n")
        fh.truncate(512 * 1024**2)  # sparse
    started = time.perf_counter()
    with pytest.raises(CorpusError, match=r"512\.0 MiB, larger than the limit of 1\.0 MiB"):
        load_corpus(path, max_bytes=1024**2)
    assert time.perf_counter() - started < 1.0
    stream = _CountingStream(50 * 1024**2)
    with pytest.raises(CorpusError, match="larger than the limit"):
        load_corpus(stream, name="stream.csv", max_bytes=1000)
    assert stream.read_bytes == 1001  # one byte past the limit, never the whole stream
