"""Run bundles: export → import round trip, stripped texts, and every kind of refused bundle."""

from __future__ import annotations

import io
import json
import re
import shutil
import stat
import struct
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flare_core.answer.stored import VERDICT_FILE
from flare_core.errors import BundleError
from flare_core.store.bundle import export_run
from flare_core.store.bundle_import import import_run
from flare_core.store.runs import Run, RunStore, safe_name

MODELS = ["all-MiniLM-L6-v2", "glove-6b-50d"]
TEXTS = [
    "The central bank raised interest rates again.",
    "A late goal settled the cup final.",
    "New phones were shown at the trade fair.",
    "Parliament debated the budget until midnight.",
    "<script>alert(1)</script> a text with markup",
    "The film won three awards at the festival.",
]


def make_run(root: Path, run_id: str = "run-a", status: str = "done") -> Run:
    """A minimal, well-formed stored run: corpus, embeddings of two models, a summary, pairs and extras."""
    n = len(TEXTS)
    manifest = {
        "name": "bundle test",
        "status": status,
        "corpus": {"source_name": "test.csv", "n_texts": n, "has_labels": True, "label_column": "label"},
        "models": [{"id": m, "kind": "registry", "role": "candidate", "status": "done"} for m in MODELS],
        "params": {"models": MODELS, "seed": 0},
        "versions": {"python": "3"},
        "seeds": {"global": 0},
        "timings": {"embeddings": 1.0},
    }
    run = RunStore(root).create(manifest, run_id=run_id)
    run.update(status=status)
    run.save_frame(
        pd.DataFrame({"id": [f"t{i}" for i in range(n)], "text": TEXTS, "label": list("ababab")}),
        "corpus.parquet",
    )
    rng = np.random.default_rng(0)
    for dim, model in zip((8, 5), MODELS, strict=True):
        run.save_embeddings(model, rng.normal(size=(n, dim)))
    run.save_frame(
        pd.DataFrame({"model": MODELS, "flow_score": [0.5, 0.25], "dim": [8, 5]}), "summary.parquet"
    )
    run.save_frame(
        pd.DataFrame({"text_a": TEXTS[:2], "text_b": TEXTS[2:4], "score": [1.0, 2.0]}), "pairs.parquet"
    )
    run.save_json({"text": "all-MiniLM-L6-v2 is recommended."}, VERDICT_FILE)
    run.save_array(np.arange(4, dtype=np.int64), "collapse", "sample_rows.npy")
    # files a bundle must leave out
    (run.path / "worker.log").write_text("log")
    (run.path / "worker.heartbeat").write_text("1.0")
    (run.path / "cancel.requested").write_text("x")
    (run.path / ".tmp-abc.json").write_text("{}")
    pairs_dir = run.path / "sufficiency" / "flow" / "pairs"
    pairs_dir.mkdir(parents=True)
    (pairs_dir / "a__b.pt").write_bytes(b"\x80\x04torch pickle")
    return run


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def bundle_bytes(run: Run, tmp_path: Path, **kwargs) -> bytes:
    return export_run(run, tmp_path / "out.zip", **kwargs).read_bytes()


def rezip(data: bytes, edit=None, add: dict[str, bytes] | None = None, drop: tuple[str, ...] = ()) -> bytes:
    """A copy of a bundle with members dropped, edited (``edit(name, data) -> data``) or added."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename in drop:
                continue
            body = src.read(info)
            dst.writestr(info.filename, edit(info.filename, body) if edit else body)
        for name, body in (add or {}).items():
            dst.writestr(name, body)
    return out.getvalue()


@pytest.fixture
def source_run(tmp_path) -> Run:
    return make_run(tmp_path / "source")


@pytest.fixture
def good_bundle(source_run, tmp_path) -> bytes:
    return bundle_bytes(source_run, tmp_path)


@pytest.fixture
def target(tmp_path) -> RunStore:
    return RunStore(tmp_path / "target")


# -- round trip -----------------------------------------------------------------------------------------------


def test_round_trip_gives_identical_files(source_run, tmp_path, target):
    path = export_run(source_run, tmp_path / "run.zip")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    assert "manifest.json" in names and "corpus.parquet" in names
    assert f"embeddings/{safe_name(MODELS[0])}.npy" in names
    assert not any(n.endswith((".pt", ".log", ".heartbeat", ".requested")) or ".tmp-" in n for n in names)

    run = import_run(target, path)
    assert run.id == source_run.id and target.exists(run.id)
    before, after = files_of(source_run.path), files_of(run.path)
    kept = {k: v for k, v in before.items() if k.endswith((".parquet", ".npy")) or k == VERDICT_FILE}
    assert {k: after[k] for k in kept} == kept
    assert set(after) == {k for k in before if k.endswith((".parquet", ".npy", ".json")) and ".tmp-" not in k}
    manifest = run.manifest
    assert manifest["texts_stripped"] is False
    assert manifest["imported"]["from_id"] == source_run.id
    assert manifest["models"] == source_run.manifest["models"]
    assert np.array_equal(run.load_embeddings(MODELS[1]), source_run.load_embeddings(MODELS[1]))


def test_import_from_bytes_under_a_new_id_and_existing_id_is_refused(good_bundle, target):
    import_run(target, good_bundle)
    before = snapshot(target.root)
    with pytest.raises(BundleError, match="already exists.*run_id"):
        import_run(target, good_bundle)
    assert snapshot(target.root) == before
    copy = import_run(target, good_bundle, run_id="copy-1")
    assert copy.id == "copy-1" and copy.manifest["id"] == "copy-1"
    with pytest.raises(BundleError, match="'copy-1' already exists"):
        import_run(target, good_bundle, run_id="copy-1")


def test_export_into_a_folder_is_deterministic(source_run, tmp_path):
    folder = tmp_path / "bundles"
    folder.mkdir()
    first = export_run(source_run, folder)
    assert first == folder / f"{source_run.id}.zip"
    data = first.read_bytes()
    assert export_run(source_run, folder).read_bytes() == data
    assert [p.name for p in folder.iterdir()] == [first.name]  # no temporary file left behind


def test_without_texts(source_run, tmp_path, target):
    path = export_run(source_run, tmp_path / "notexts.zip", include_texts=False)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        content = b"".join(zf.read(n) for n in zf.namelist())
    for text in TEXTS:
        assert text.encode() not in content
    run = import_run(target, raw)
    assert run.manifest["texts_stripped"] is True
    corpus = run.corpus_frame()
    assert list(corpus["text"]) == [""] * len(TEXTS)
    assert list(corpus["id"]) == [f"t{i}" for i in range(len(TEXTS))] and list(corpus["label"]) == list(
        "ababab"
    )
    pairs = run.load_frame("pairs.parquet")
    assert list(pairs.columns) == ["score"]
    assert run.load_frame("summary.parquet").equals(source_run.load_frame("summary.parquet"))


def test_running_run_is_imported_as_failed(tmp_path, target):
    run = make_run(tmp_path / "src2", run_id="still-running", status="running")
    imported = import_run(target, export_run(run, tmp_path / "r.zip"))
    assert imported.status == "failed"
    assert imported.manifest["error"] == "imported while still running"


def test_export_validates(source_run, tmp_path):
    with pytest.raises(BundleError, match="expects a Run"):
        export_run("run-a", tmp_path / "x.zip")
    with pytest.raises(BundleError, match="inside the run folder"):
        export_run(source_run, source_run.path / "x.zip")


@pytest.mark.parametrize("include_texts", [True, False])
def test_a_run_deleted_just_as_its_export_starts_is_said_in_words(
    source_run, tmp_path, monkeypatch, include_texts
):
    # the order a concurrent `flare delete` can produce: the manifest is checked, then the folder is
    # renamed away before the export reads it
    from flare_core.store import bundle

    read = bundle.Run.manifest.fget

    def deleted_first(run):
        shutil.rmtree(run.path)
        return read(run)

    monkeypatch.setattr(bundle.Run, "manifest", property(deleted_first))
    out = tmp_path / "out.zip"
    with pytest.raises(BundleError, match="was deleted while it was being exported; no bundle was written"):
        export_run(source_run, out, include_texts=include_texts)
    assert not out.exists()


# -- refused bundles: each with its reason, nothing written ---------------------------------------------------


def _symlink_bundle(good: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
        link = zipfile.ZipInfo("link.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        dst.writestr(link, "/etc/passwd")
    return out.getvalue()


def _pickled_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def _edit_manifest(**fields):
    def edit(name: str, body: bytes) -> bytes:
        if name != "manifest.json":
            return body
        manifest = json.loads(body)
        manifest.update(fields)
        return json.dumps(manifest).encode()

    return edit


def _replace(member: str, new: bytes):
    return lambda name, body: new if name == member else body


def _wrong_rows() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((len(TEXTS) + 1, 8), dtype=np.float32))
    return buffer.getvalue()


EMB0 = f"embeddings/{safe_name(MODELS[0])}.npy"

REFUSED = {
    "parent": (lambda g: rezip(g, add={"../evil.json": b"{}"}), r"'\.\./evil\.json' contains '\.\.'"),
    "nested-parent": (lambda g: rezip(g, add={"a/../../evil.json": b"{}"}), "contains '..'"),
    "absolute": (lambda g: rezip(g, add={"/etc/x.json": b"{}"}), "is an absolute path"),
    "backslash": (lambda g: rezip(g, add={"a\\b.json": b"{}"}), "contains a backslash"),
    "drive": (lambda g: rezip(g, add={"C:x.json": b"{}"}), "drive letter"),
    "symlink": (_symlink_bundle, "is a symbolic link"),
    "python": (lambda g: rezip(g, add={"evil.py": b"import os"}), "'evil.py' has a file type"),
    "pickle-file": (lambda g: rezip(g, add={"model.pkl": b"\x80\x04."}), "'model.pkl' has a file type"),
    "pickled-npy": (lambda g: rezip(g, add={"extra.npy": _pickled_npy()}), "pickles are never loaded"),
    "too-deep": (lambda g: rezip(g, add={"a/b/c/d/e/f.json": b"{}"}), "levels deep"),
    "bad-part": (lambda g: rezip(g, add={"-x.json": b"{}"}), "invalid path part"),
    "no-manifest": (lambda g: rezip(g, drop=("manifest.json",)), "no manifest.json"),
    "manifest-not-json": (lambda g: rezip(g, edit=_replace("manifest.json", b"{nope")), "not valid JSON"),
    "manifest-list": (lambda g: rezip(g, edit=_replace("manifest.json", b"[]")), "must be a JSON object"),
    "manifest-keys": (
        lambda g: rezip(g, edit=_replace("manifest.json", b'{"id": "abc"}')),
        "lacks the required keys",
    ),
    "manifest-id": (lambda g: rezip(g, edit=_edit_manifest(id="../../etc")), "invalid run id"),
    "wrong-rows": (lambda g: rezip(g, edit=_replace(EMB0, _wrong_rows())), r"has shape \(7, 8\).*6 texts"),
    "stray-embeddings": (
        lambda g: rezip(g, add={"embeddings/other.npy": _wrong_rows()}),
        "not the embeddings file of any model",
    ),
    "corrupt-parquet": (
        lambda g: rezip(g, edit=_replace("summary.parquet", b"PAR1 this is not parquet PAR1")),
        "'summary.parquet' is not a readable Parquet file",
    ),
    "corrupt-json": (
        lambda g: rezip(g, edit=_replace(VERDICT_FILE, b"{")),
        "'verdict.json' is not valid JSON",
    ),
    "duplicate": (lambda g: rezip(g, add={VERDICT_FILE: b"{}"}), "appears twice"),
    "not-zip": (lambda g: b"this is not a zip file at all", "not a readable zip archive"),
}


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_bundles_write_nothing(case, good_bundle, target):
    make, message = REFUSED[case]
    data = make(good_bundle)
    with pytest.raises(BundleError, match=message):
        import_run(target, data)
    assert snapshot(target.root) == []


def test_zip_bomb_by_declared_size(target):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("manifest.json", "w") as fh:
        zero = bytes(1 << 20)
        for _ in range(300):  # 300 MB of zeros, about 300 KB compressed
            fh.write(zero)
    with pytest.raises(BundleError, match="more than the limit of 1,000,000 bytes"):
        import_run(target, out.getvalue(), max_bytes=1_000_000)
    assert snapshot(target.root) == []


def test_zip_bomb_by_ratio(good_bundle, target):
    data = rezip(good_bundle, add={"zeros.json": bytes(10 << 20)})
    with pytest.raises(BundleError, match="compression ratio of .* refused as a possible zip bomb"):
        import_run(target, data)
    assert snapshot(target.root) == []


def test_lying_header_is_caught_while_streaming(good_bundle, target):
    """A central directory that understates a member's size: decompression stops and the member is refused."""
    data = bytearray(rezip(good_bundle, add={"zeros.json": b"[" + b"0," * 400_000 + b"0]"}))
    index = next(
        m.start()
        for m in re.finditer(b"PK\x01\x02", bytes(data))
        if data[m.start() + 46 : m.start() + 46 + len(b"zeros.json")] == b"zeros.json"
    )
    data[index + 24 : index + 28] = struct.pack("<I", 1000)  # uncompressed size: 1000 bytes
    with pytest.raises(BundleError, match="zeros.json.*cannot be decompressed"):
        import_run(target, bytes(data))
    assert snapshot(target.root) == []


def test_import_validates_arguments(good_bundle, target, tmp_path):
    with pytest.raises(BundleError, match="invalid run id"):
        import_run(target, good_bundle, run_id="../x")
    with pytest.raises(BundleError, match="max_bytes"):
        import_run(target, good_bundle, max_bytes=0)
    with pytest.raises(BundleError, match="no bundle file"):
        import_run(target, tmp_path / "missing.zip")
    with pytest.raises(BundleError, match="expects a RunStore"):
        import_run(str(tmp_path), good_bundle)
    assert snapshot(target.root) == []


@pytest.mark.slow
def test_round_trip_of_a_pipeline_run(labelled_run, tmp_path, target):
    from flare_core.view.results import run_results

    path = export_run(labelled_run, tmp_path / "labelled.zip")
    with zipfile.ZipFile(path) as zf:
        assert not any(n.endswith(".pt") for n in zf.namelist())
    run = import_run(target, path)
    before, after = files_of(labelled_run.path), files_of(run.path)
    assert {k: v for k, v in before.items() if k in after and k != "manifest.json"} == {
        k: v for k, v in after.items() if k != "manifest.json"
    }
    assert run_results(run)["summary"] == run_results(labelled_run)["summary"]
