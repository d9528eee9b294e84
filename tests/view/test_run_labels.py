"""The labels of runs in a list: runs of one name told apart by their short ids and the settings in which
they differ, and no two labels alike (the run picker is resolved by its label)."""

from __future__ import annotations

from flare_core.view.run_labels import differing_settings, run_labels


def _manifest(
    run_id: str, name: str = "reviews", created: str = "2026-11-28T15:40:05+00:00", **params
) -> dict:
    return {
        "id": run_id,
        "name": name,
        "created": created,
        "corpus": {"source_name": "reviews.csv", "n_texts": 120},
        "params": {"models": ["glove-6b-50d"], "use": "unsure", "tolerance_points": 2.0, "seed": 0, **params},
    }


def test_runs_of_one_name_are_told_apart_by_the_settings_that_differ():
    runs = [
        _manifest("20261128-154035-0b0b0b", tolerance_points=5.0, seed=3),
        _manifest("20261128-154005-0a0a0a"),
        _manifest("20261128-120000-0c0c0c", name="contracts", created="2026-11-28T12:00:00+00:00"),
    ]
    statuses = {m["id"]: "done" for m in runs}
    labels = run_labels(runs, statuses)
    assert labels == {
        "20261128-154035-0b0b0b": "reviews · done · 2026-11-28 15:40 · 0b0b0b · within 5 points · seed 3",
        "20261128-154005-0a0a0a": "reviews · done · 2026-11-28 15:40 · 0a0a0a · within 2 points · seed 0",
        "20261128-120000-0c0c0c": "contracts · done · 2026-11-28 12:00 · 0c0c0c",
    }
    assert differing_settings(runs)["20261128-120000-0c0c0c"] == ""


def test_at_most_three_settings_are_named_and_the_file_comes_first():
    runs = [
        _manifest("20261128-154005-0a0a0a"),
        _manifest(
            "20261128-154035-0b0b0b", use="search", seed=1, models=["tfidf-svd-256"], tolerance_points=1.0
        ),
    ]
    runs[1]["corpus"] = {"source_name": "other.csv", "n_texts": 120}
    words = differing_settings(runs)
    assert words["20261128-154035-0b0b0b"] == "file other.csv · models tfidf-svd-256 · for search"


def test_labels_stay_unique_when_everything_shown_is_alike():
    # two ids with the same random end, the same minute, name and settings: each label names its whole id
    runs = [_manifest("20261128-154005-0a0a0a"), _manifest("20261128-154006-0a0a0a")]
    labels = run_labels(runs, {m["id"]: "done" for m in runs})
    assert len(set(labels.values())) == 2
    assert labels["20261128-154006-0a0a0a"].endswith(" · 20261128-154006-0a0a0a")
    # an odd setting from a damaged or foreign manifest is named as it is, never raising
    odd = [_manifest("20261128-154005-0a0a0a"), _manifest("20261128-154035-0b0b0b", tolerance_points="abc")]
    assert run_labels(odd, {})["20261128-154035-0b0b0b"].endswith("0b0b0b · within abc")
