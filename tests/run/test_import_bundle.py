"""Importing a bundle checks every run setting as ``flare run`` and the New run page do: one odd setting
refuses the whole bundle, with the reason, and nothing is imported."""

from __future__ import annotations

import json

import pytest

from flare_core.cli.parser import main
from flare_core.errors import BundleError
from flare_core.run.create import import_bundle
from flare_core.store.runs import RunStore
from tests.store.test_bundle import bundle_bytes, make_run, rezip, snapshot

#: tolerance_points as a hostile bundle writes them (JSON text): none is one of 1, 2 or 5 points
ODD_TOLERANCES = ["NaN", "-1", "1e309", '"abc"', "null", "1e-300", "[2]", "1e6", "0", "true", "2.5"]
#: other settings, each refused by the checks of a new run
ODD_SETTINGS = {
    "seed": '"x"',
    "use": '"everything"',
    "max_dims": "1",
    "workers": "0",
    "collapse_texts": "1.5",
    "map_points": "-3",
    "validation": '["subsampling", "bogus"]',
    "estimators": '["knn"]',
    "models": '"glove-6b-50d"',
    "collapse": '"yes"',
    "flow_preset": '"turbo"',
    "device": "[1]",
}


def _with_params(key: str, raw: str):
    """An edit of a bundle's manifest that writes ``raw`` (JSON text) as the setting ``key``."""

    def edit(name: str, body: bytes) -> bytes:
        if name != "manifest.json":
            return body
        manifest = json.loads(body)
        text = json.dumps(manifest)
        params = json.dumps(manifest["params"])
        patched = params[:-1] + f', "{key}": {raw}' + "}"
        return text.replace(params, patched).encode()

    return edit


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("bundle")
    return bundle_bytes(make_run(folder / "source"), folder)


@pytest.mark.parametrize("raw", ODD_TOLERANCES)
def test_an_odd_tolerance_refuses_the_whole_bundle(raw, good_bundle, tmp_path):
    target = RunStore(tmp_path / "target")
    data = rezip(good_bundle, edit=_with_params("tolerance_points", raw))
    with pytest.raises(
        BundleError, match=r"run settings are refused: the tolerance for 'good enough' is one of"
    ):
        import_bundle(target, data)
    assert snapshot(target.root) == []


@pytest.mark.parametrize("key", sorted(ODD_SETTINGS))
def test_every_other_odd_setting_refuses_the_whole_bundle(key, good_bundle, tmp_path):
    target = RunStore(tmp_path / "target")
    data = rezip(good_bundle, edit=_with_params(key, ODD_SETTINGS[key]))
    with pytest.raises(BundleError, match=r"run settings are refused: .*nothing was imported"):
        import_bundle(target, data)
    assert snapshot(target.root) == []


@pytest.mark.parametrize("raw", ["1", "2", "5", "2.0"])
def test_the_three_tolerances_import(raw, good_bundle, tmp_path):
    target = RunStore(tmp_path / "target")
    run = import_bundle(target, rezip(good_bundle, edit=_with_params("tolerance_points", raw)))
    assert run.manifest["params"]["tolerance_points"] == float(raw)


def test_flare_import_says_why_and_imports_nothing(good_bundle, tmp_path, capsys):
    path = tmp_path / "odd.zip"
    path.write_bytes(rezip(good_bundle, edit=_with_params("tolerance_points", "[2]")))
    store = tmp_path / "store"
    assert main(["import", str(path), "--runs-dir", str(store)]) == 2
    err = capsys.readouterr().err
    assert (
        "run settings are refused: the tolerance for 'good enough' is one of 1, 2, 5 points, got [2]" in err
    )
    assert "Traceback" not in err
    assert snapshot(store) == []
