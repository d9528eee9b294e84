"""How runs are told apart in a list (the sidebar's run picker): each run's label names it, gives its short
id, status and start, and, for runs of one name, the settings in which they differ. Labels are unique: the
picker is resolved by its label, so two equal labels would choose the wrong run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flare_core.view.results import short_run_id

#: The settings that tell runs of one name apart, in the order they are named, each in words.
_SETTING_WORDS: dict[str, Callable[[Any], str]] = {
    "source_name": lambda v: f"file {v}",
    "n_texts": lambda v: f"{v} texts",
    "models": lambda v: "models " + ", ".join(map(str, v)) if isinstance(v, list) else f"models {v}",
    "use": lambda v: f"for {v}",
    "tolerance_points": lambda v: f"within {v:g} points" if isinstance(v, int | float) else f"within {v}",
    "estimators": lambda v: "estimators " + ", ".join(map(str, v)) if isinstance(v, list) else str(v),
    "flow_preset": lambda v: f"{v} preset",
    "seed": lambda v: f"seed {v}",
    "controls": lambda v: "controls " + (", ".join(map(str, v)) or "none") if isinstance(v, list) else str(v),
    "collapse": lambda v: "collapse on" if v else "collapse off",
    "max_dims": lambda v: f"width {v}" if v else "full width",
}
#: At most this many differing settings are named in one label.
MAX_SETTINGS = 3


def _settings(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``manifest`` that :data:`_SETTING_WORDS` can name."""
    corpus = manifest.get("corpus") or {}
    params = manifest.get("params") or {}
    found = {key: corpus.get(key) for key in ("source_name", "n_texts")}
    found |= {key: params.get(key) for key in _SETTING_WORDS if key not in found}
    return found


def _words(key: str, value: Any) -> str:
    try:
        return _SETTING_WORDS[key](value)
    except (TypeError, ValueError):
        return f"{key} {value!r}"


def differing_settings(manifests: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Run id -> the settings in words in which it differs from runs of the same name ("within 5 points ·
    seed 3"); empty for a run whose name no other run has, or whose settings are all alike."""
    by_name: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for manifest in manifests:
        by_name[str(manifest.get("name") or manifest.get("id"))].append(manifest)
    words = {str(m.get("id")): "" for m in manifests}
    for group in by_name.values():
        if len(group) < 2:
            continue
        settings = [_settings(m) for m in group]
        differ = [k for k in _SETTING_WORDS if len({repr(s.get(k)) for s in settings}) > 1]
        for manifest, values in zip(group, settings, strict=True):
            shown = [_words(k, values[k]) for k in differ[:MAX_SETTINGS] if values.get(k) is not None]
            words[str(manifest.get("id"))] = " · ".join(shown)
    return words


def run_labels(manifests: Sequence[Mapping[str, Any]], statuses: Mapping[str, str]) -> dict[str, str]:
    """Run id -> its label in a list of runs: "name · status · 2026-11-28 15:40 · a1b2c3", with the
    settings that differ among runs of the same name after it ("· within 5 points"). No two labels are
    equal: where two still would be, each names its whole id."""
    differ = differing_settings(manifests)
    labels: dict[str, str] = {}
    for manifest in manifests:
        run_id = str(manifest.get("id"))
        created = str(manifest.get("created") or "")[:16].replace("T", " ")
        parts = [str(manifest.get("name") or run_id), statuses.get(run_id, ""), created, short_run_id(run_id)]
        labels[run_id] = " · ".join(p for p in [*parts, differ[run_id]] if p)
    counts: dict[str, int] = defaultdict(int)
    for label in labels.values():
        counts[label] += 1
    for run_id, label in list(labels.items()):
        if counts[label] > 1:
            labels[run_id] = f"{label} · {run_id}"
    return labels
