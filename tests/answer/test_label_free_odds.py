"""The label-free rules judged on the shipped benchmark: computed once for this code and kept in the cache
folder, read back identical, and computed again when the kept file is damaged or the code changes."""

from __future__ import annotations

import json

import pytest

from flare_core.answer import label_free


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLARE_CACHE_DIR", str(tmp_path))
    label_free._judged.cache_clear()
    yield tmp_path / "judged"
    label_free._judged.cache_clear()


def test_the_judged_rules_are_kept_read_back_identical_and_recomputed_when_damaged(own_cache):
    shipped = json.dumps(label_free.rules_benchmark(), sort_keys=True)
    if not json.loads(shipped):
        pytest.skip("no shipped benchmark")
    fresh = {use: label_free._judge(use, shipped) for use in ("unsure", "search")}
    first = label_free.rule_for("unsure")
    assert first == fresh["unsure"] and first["rule"]
    (kept,) = own_cache.glob("*.json")
    assert json.loads(kept.read_text()) == fresh["unsure"]
    label_free._judged.cache_clear()
    assert label_free.rule_for("unsure") == fresh["unsure"]  # read back from the file
    assert label_free.rule_for("search") == fresh["search"]  # another use: its own file
    assert len(list(own_cache.glob("*.json"))) == 2
    kept.write_text('{"rule": "dim", "cut')  # a damaged file: computed again and written again
    label_free._judged.cache_clear()
    assert label_free.rule_for("unsure") == fresh["unsure"]
    assert json.loads(kept.read_text()) == fresh["unsure"]


def test_another_version_of_the_code_or_of_the_benchmark_has_its_own_key(monkeypatch):
    shipped = json.dumps(label_free.rules_benchmark(), sort_keys=True)
    key = label_free._judged_key("unsure", shipped)
    assert key != label_free._judged_key("search", shipped)
    assert key != label_free._judged_key("unsure", shipped.replace("}", ', "x": 1}', 1))
    monkeypatch.setattr(label_free, "_source_digest", lambda: "other code")
    assert key != label_free._judged_key("unsure", shipped)
