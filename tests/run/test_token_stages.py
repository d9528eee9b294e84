"""Damaged token stores left in the cache's scratch folder: found, named and removed (``flare doctor``)."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.encoders import random_init_transformer, write_token_states
from flare_core.encoders.token_store import META_FILE, OFFSETS_FILE, TOKENS_FILE
from flare_core.run.token_stages import check_scratch, remove_scratch

CONFIG = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128}  # fmt: skip


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    encoder = random_init_transformer(CONFIG, seed=0, device="cpu")
    return write_token_states(
        encoder, ["a first text", "and a second one", "third"], tmp_path_factory.mktemp("s") / "store"
    )


@pytest.mark.parametrize("name", [TOKENS_FILE, OFFSETS_FILE, META_FILE])
def test_a_damaged_store_is_named_and_removed_and_a_sound_one_kept(sound, tmp_path, name):
    import shutil

    scratch = tmp_path / "scratch"
    victim, neighbour = scratch / "tokens-a" / "store", scratch / "tokens-b" / "store"
    shutil.copytree(sound.directory, victim)
    shutil.copytree(sound.directory, neighbour)
    assert check_scratch(scratch) == []
    (victim / name).write_bytes((victim / name).read_bytes()[: (victim / name).stat().st_size // 2])
    findings = check_scratch(scratch)
    assert [(f.file, f.kind, f.recomputable) for f in findings] == [(str(victim / name), "damaged", True)]
    assert (
        findings[0].message.startswith(f"{victim / name} ") and "flare doctor --repair" in findings[0].message
    )
    assert remove_scratch(findings) == [f"removed the damaged token store {victim}"]
    assert not (scratch / "tokens-a").exists() and check_scratch(scratch) == []
    assert np.array_equal(np.load(neighbour / TOKENS_FILE), np.asarray(sound.rows))


def test_a_store_being_written_is_left_alone(sound, tmp_path):
    import shutil

    scratch = tmp_path / "scratch"
    partial = scratch / "tokens-a" / ".tmp-store-1"
    shutil.copytree(sound.directory, partial)
    (partial / TOKENS_FILE).write_bytes(b"\x93NUMPY")
    assert check_scratch(scratch) == []


def test_collapse_reports_each_models_pairs_in_twentieths():
    from flare_core.run.token_stages import _PairsProgress

    calls = []
    progress = _PairsProgress(
        lambda *args, **kw: calls.append((args[1], kw["work_done"], kw["work_total"])), 1, "m", 3
    )
    for done in (0, 3, 5, 10, 11, 100):  # 3 and 11 pairs finish no new twentieth of 100: not reported again
        progress(done, 100)
    assert calls == [(1, 20, 60), (1, 21, 60), (1, 22, 60), (1, 40, 60)]
